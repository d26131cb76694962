"""GPU: every seed family verifies on awkward shapes (1x1x1, K = 1, primes, M = 1, odd N, batch > 1)."""

from __future__ import annotations

import random

import pytest

from hgemm.entry import EvalOptions
from hgemm.judge import KernelJudge
from hgemm.problem import Problem

pytestmark = pytest.mark.gpu

# Shapes a TMA kernel must handle: aligned pitches with ragged tiles, K tails, batch, many tiles.
TMA_EDGE = [Problem(4096, 4096, 4104), Problem(4097, 72, 264), Problem(8, 264, 8), Problem(130, 136, 4096, 3)]
EDGE = [Problem(1, 1, 1), Problem(1, 257, 33), Problem(17, 1, 1), Problem(127, 131, 137), Problem(1, 4096, 4096),
        Problem(63, 65, 129, 3), Problem(64, 1001, 256), Problem(256, 256, 4104), Problem(5, 3000, 2048)]


def sample(n_per_family: int, seed: int = 0) -> list[tuple[str, str]]:
    from kernels_corpus.families import FAMILIES

    picked = []
    rng = random.Random(seed)
    for fam in FAMILIES:
        params = fam.variants()
        # always include split-K variants (their reduction is the easiest part to get wrong) and the
        # loaders that realign or copy rows for the pitches TMA refuses (ldg, staged)
        split = [p for p in params if p.get("split_k", 1) > 1]
        fed = [p for p in params if p.get("loader") in ("ldg", "staged")]
        chosen = rng.sample(params, min(n_per_family, len(params))) + split[:2]
        chosen += [p for p in fed if p not in chosen]
        if fam.__name__.endswith(".wgmma"):
            # the cluster (TMA multicast) variants: the peer barriers and the pair whose second tile
            # lies past M (4097 x 72 x 264) are theirs alone
            chosen += [p for p in params if p.get("cluster", 1) > 1 and p not in chosen]
            # the epilogue through shared memory (storer warps), on each kind of tile and loader
            chosen += [p for p in fam.EPILOGUE_SMEM_PROBE if p not in chosen]
            # the 64-row tiles, whose rows past M are most of the tile on the skinny problems they serve
            for bn in {p["bn"] for p in params if p["bm"] == 64}:
                first = next(p for p in params if p["bm"] == 64 and p["bn"] == bn and p.get("split_k", 1) == 1)
                chosen += [first] if first not in chosen else []
            # cluster split-K: each tile and split once (the reduce-scatter's slots and row groups
            # differ with both; K = 1 and K tails leave some shares empty)
            for tile_split in {(p["bm"], p["bn"], p["consumers"], p["split_k"]) for p in split}:
                first = next(p for p in split if (p["bm"], p["bn"], p["consumers"], p["split_k"]) == tile_split)
                chosen += [first] if first not in chosen else []
        # the skinny NN kernels with 8 loads in flight, each row count and split once
        if fam.__name__.endswith(".skinny"):
            chosen += [p for p in params if p.get("unroll") == 8 and p["bn"] == 256 and p not in chosen]
        # the skinny tensor-core kernels' realigned loads, each tile and role once
        if fam.__name__.endswith(".skinny_mma"):
            for key in {(p["t"], p["swap"]) for p in params if p.get("loads") == "pair"}:
                first = next(p for p in params if p.get("loads") == "pair" and (p["t"], p["swap"]) == key)
                chosen += [first] if first not in chosen else []
        # and mma.sync's element loads for misaligned rows (renderable, not in variants())
        if fam.__name__.endswith(".mma_sync"):
            chosen += [dict(p, misaligned_loads="elem") for p in chosen[:2]]
        picked += [(fam.name(p), fam.render(p)) for p in chosen]
    return picked


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_family_variants_verify_on_edge_shapes(layout):
    from hgemm.candidate import parse_candidate, parse_spec
    from hgemm.library import tma_compatible

    variants = [(n, t) for n, t in sample(6) if layout in parse_spec(t).layouts]
    problems = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE + TMA_EDGE]
    with KernelJudge(EvalOptions(timing=False)) as judge:
        verdicts = judge.judge([t for _, t in variants], [problems] * len(variants))
    failures = {}
    for (name, text), v in zip(variants, verdicts):
        cand = parse_candidate(text)
        bad = []
        for r in v["results"]:
            p = Problem.from_dict(r["problem"])
            # a TMA kernel may decline a shape whose row pitch TMA refuses; it must pass every other one
            expected = "ok" if tma_compatible(cand, p) else "unsupported"
            if r["status"] != expected:
                bad.append((r["problem"], r["status"], r.get("error", "")[:300]))
        if bad or not v["results"]:
            failures[name] = bad or v.get("error")
    assert not failures, failures


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_two_ctas_an_sm_verify_on_edge_shapes(layout):
    """`ctas_per_sm: 2`: a grid of 2 * num_sms walking the tiles (4096 x 4096's 64-row tiles, batched
    ragged ones), every such variant on the edge shapes."""
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [v for v in wgmma.variants() if v.get("ctas_per_sm", 1) > 1]
    assert len(variants) == 10
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_mma_sync_32_row_tiles_verify_on_edge_shapes(layout):
    """The mma.sync template at the 32-row tiles of benchmarks/small_tiles/ (32 x 32 and 32 x 64, warps of
    16 x 16 and 16 x 32), every ring and split, on the edge shapes (odd pitches through the register
    path, K shorter than one split a k tile, batch) and the class's small long-K shapes."""
    from benchmarks.small_tiles import make_kernels as small_tiles
    from kernels_corpus.families import mma_sync

    variants = small_tiles.variants(small_tiles.SMALL)
    assert len(variants) == 40
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE + [Problem(143, 704, 305), Problem(67, 73, 4480)]]
    assert not failures_on_own_shapes(mma_sync, variants, [shapes] * len(variants))


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_clusters_sharing_either_operand_verify_on_edge_shapes(layout):
    """2-CTA clusters sharing B (vertically adjacent tiles) or A (horizontally adjacent), every tile of
    benchmarks/multicast/ at its deepest ring, on the edge shapes TMA serves and two whose last cluster
    has its second tile wholly past M (4097 x 72 x 264) or past N (130 x 4104 x 264: a 256-column tile's
    peer starts 248 columns out, a 64-column one's 56), and one whose A tile's second half (the peer's
    share, sharing A) lies wholly past M (40 x 520 x 264)."""
    from benchmarks.multicast import make_kernels as multicast
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in multicast.variants(depths=1) if p.get("cluster", 1) > 1]
    assert len(variants) == 18 and sum(p.get("multicast") == "A" for p in variants) == 9
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(130, 4104, 264), Problem(40, 520, 264)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_last_tile_parked_in_the_ring_verifies_on_edge_shapes(layout):
    """`epilogue: last` on every tile of benchmarks/last_parked/: CTAs of one tile (parked in the ring),
    of many (every tile but the last from registers), ragged tiles, batch, and the staged loader."""
    from benchmarks.last_parked import make_kernels as last_parked
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in last_parked.variants() if p.get("epilogue") == "last"]
    variants.append(dict(variants[0], loader="staged", stage="AB"))
    assert len(variants) == 10 and all(wgmma._valid(p) for p in variants)
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5), Problem(2048, 2048, 2048), Problem(1025, 1023, 513)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_tensor_store_epilogue_verifies_on_edge_shapes(layout):
    """`epilogue: bulk_tensor` (C by TMA tensor stores of swizzled 16 x 64 boxes) on the short-K
    experiment's tiles (benchmarks/short_k_stores/) and in a cluster sharing either operand: CTAs of one
    tile and of many (a warp's boxes reused once its stores have read them), ragged tiles (boxes TMA clips
    at M and N, row groups wholly past M skipped), batch, and a K of one k tile; and every variant of the
    family with them (its rings, the clustered and the staged forms) on the same shapes."""
    from benchmarks.short_k_stores import make_kernels as short_k_stores
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in short_k_stores.variants() if p.get("epilogue") == "bulk_tensor"]
    variants += [dict(variants[0], cluster=2), dict(variants[0], cluster=2, multicast="A")]
    # and the family's own two-consumer ones: every ring, the clustered and the staged forms (one operand
    # copied or both)
    variants += [p for p in wgmma.variants()
                 if p.get("epilogue") == "bulk_tensor" and p["consumers"] == 2 and p not in variants]
    assert len(variants) == 15 and all(wgmma._valid(p) for p in variants)
    # (1025 x 1024 x 513 and 1000 x 1000 x 201: the staged forms' odd K, C's rows aligned)
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5), Problem(1419, 1480, 64), Problem(130, 4104, 264),
                                          Problem(40, 520, 264), Problem(2048, 2048, 2048), Problem(1025, 1024, 513),
                                          Problem(1000, 1000, 201, 3)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert all(problems) and not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_tensor_stores_on_one_consumer_tiles_verify_on_edge_shapes(layout):
    """`epilogue: bulk_tensor` on the one-consumer tiles of benchmarks/one_consumer_stores/ (two m64 atoms a
    warp on 128-row tiles, one on 64-row ones, two CTAs an SM) and every one-consumer variant of the family
    with them (its rings): the edge shapes, ragged tiles and batch."""
    from benchmarks.one_consumer_stores import make_kernels as one_consumer
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in one_consumer.variants() if p["epilogue"] == "bulk_tensor"]
    variants += [p for p in wgmma.variants()
                 if p.get("epilogue") == "bulk_tensor" and p["consumers"] == 1 and p not in variants]
    assert len(variants) == 18 and all(wgmma._valid(p) for p in variants)
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5), Problem(413, 920, 960), Problem(40, 520, 264)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert all(problems) and not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_two_consumer_128x64_tile_verifies_on_edge_shapes(layout):
    """The 128 x 64 tile with two consumer warpgroups of 64 x 64 each (benchmarks/two_consumer_128x64/),
    every variant of it the family holds (each ring with the parked epilogue, the bulk copies and the tensor
    stores): the edge shapes, ragged tiles (rows of one consumer wholly past M among them) and batch."""
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in wgmma.variants() if (p["bm"], p["bn"], p["consumers"]) == (128, 64, 2)]
    assert len(variants) == 9
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5), Problem(413, 920, 960), Problem(40, 520, 264)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert all(problems) and not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_bulk_copy_epilogue_verifies_on_edge_shapes(layout):
    """`epilogue: bulk` on every tile of benchmarks/bulk_store/ (one CTA an SM and two), every variant of
    the family (clusters sharing B, staged copies of A, B or both) and a cluster sharing A: CTAs of one
    tile and of many (a warp's rows of the buffer reused once its copies have read them), ragged tiles,
    batch, and N not a multiple of 8 (TN, staged: from registers instead)."""
    from benchmarks.bulk_store import make_kernels as bulk_store
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in bulk_store.variants() if p.get("epilogue") == "bulk"]
    variants += [dict(variants[0], cluster=2, multicast="A")]
    # and the family's own: every ring, the clustered and the staged forms (one operand copied or both)
    variants += [p for p in wgmma.variants() if p.get("epilogue") == "bulk" and p not in variants]
    assert len(variants) >= 25 and all(wgmma._valid(p) for p in variants)
    # 130 x 4104 x 264: a cluster sharing A has its last peer wholly past N; 4097 x 72 x 264 (TMA_EDGE) one
    # sharing B past M
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout)
              for p in EDGE + TMA_EDGE + [Problem(1000, 1000, 200, 5), Problem(2048, 2048, 2048), Problem(1025, 1023, 513),
                                          Problem(4100, 3000, 520), Problem(130, 4104, 264)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_split_and_streamk_rings_past_six_verify_on_edge_shapes(layout):
    """The template takes rings deeper than the family's 6 stages: the small tiles' split-K and stream-K
    kernels at 8 and 12 stages, as far as shared memory holds them (benchmarks/deep_ring/), on the edge
    shapes TMA serves (a ring longer than the k tiles, K tails, ragged tiles, batch) and a few-tile long-K
    one."""
    from benchmarks.deep_ring import make_kernels as deep_ring
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [p for p in deep_ring.variants() if p["stages"] > 6]
    assert len(variants) == 12
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE + TMA_EDGE + [Problem(128, 512, 7616)]]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert not failures_on_own_shapes(wgmma, variants, problems)


def failures_on_own_shapes(fam, variants: list[dict], problems: list[list[Problem]]) -> dict:
    """Each variant of a family judged (verified, not timed) on its own list of problems: {variant name:
    its results that are not `ok`, or the judge's error where it has no results}, the failing ones only."""
    with KernelJudge(EvalOptions(timing=False)) as judge:
        verdicts = judge.judge([fam.render(v) for v in variants], problems)
    failures = {fam.name(v): [(r["problem"], r["status"], r.get("error", "")[:200]) for r in out["results"]
                              if r["status"] != "ok"] or (None if out["results"] else out.get("error"))
                for v, out in zip(variants, verdicts)}
    return {name: f for name, f in failures.items() if f}


# The narrow family's own shapes: odd pitches, the staged operand in several chunks (K past 8192 / NB),
# few rows with a long K (warps sharing k), batch, N past NB (column blocks), and (TN, the swap variants)
# a few rows of C, where every variant must verify.
NARROW = [Problem(9856, 3, 1263), Problem(37, 3, 300, 3), Problem(64, 3, 4687), Problem(3009, 1, 89, 8),
          Problem(5, 16, 9001), Problem(2688, 5, 64), Problem(63, 7, 1025, 2), Problem(300, 2, 20000),
          Problem(9, 1536, 745, 7), Problem(3, 9856, 1263), Problem(16, 2112, 20000, 2), Problem(1, 4099, 64)]
NARROW_ANY = [Problem(1, 1, 1), Problem(100, 9, 2049), Problem(17, 40, 33), Problem(20, 2, 9000)]  # every variant


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_narrow_variants_verify_on_the_shapes_they_serve(layout):
    from hgemm.candidate import parse_spec
    from kernels_corpus.families import narrow

    variants = [v for v in narrow.variants() if layout in parse_spec(narrow.render(v)).layouts]
    problems = [[q for q in (Problem(p.M, p.N, p.K, p.batch, layout) for p in NARROW) if narrow.applicable(v, q)]
                + [Problem(p.M, p.N, p.K, p.batch, layout) for p in NARROW_ANY] for v in variants]
    assert not failures_on_own_shapes(narrow, variants, problems)


# The short-K family's own shapes: odd N (every row at another offset mod V), N below V (chunks that
# straddle two rows), batch entries starting off their alignment (odd M * N), M = 1, N = 1, K at each
# KMAX and below, two column blocks; every variant verifies on those its KMAX holds.
SMALL_K = [Problem(4089, 9017, 3), Problem(37, 301, 3, 2), Problem(19, 259, 1, 3), Problem(9, 5, 7, 2),
           Problem(70, 520, 16, 1), Problem(1, 1, 9), Problem(1, 4099, 4), Problem(3001, 1, 8), Problem(64, 5493, 5, 7),
           Problem(2905, 9, 15), Problem(65, 64, 16, 3), Problem(128, 128, 1)]


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_small_k_variants_verify_on_the_shapes_they_serve(layout):
    from kernels_corpus.families import small_k

    variants = small_k.variants()
    problems = [[q for q in (Problem(p.M, p.N, p.K, p.batch, layout) for p in SMALL_K) if small_k.applicable(v, q)]
                for v in variants]
    assert all(problems)
    assert not failures_on_own_shapes(small_k, variants, problems)


# The skinny tensor-core family's own shapes: the default grid's M <= 16 shapes at full size, K tails
# (a partial 64-k chunk), N past the last column block, odd N (NN's realigned loads) and odd K (A's and
# TN's), fewer chunks than a cluster's warps, M = 1, M past one 16-row chunk and at four, batch; every variant
# verifies on all of them, the swap variants on the same shapes with M and N exchanged (N <= 16: a
# mixture-of-experts router's 8 columns, N = 1, 3 and 7, N past 16).
SKINNY_MMA = [Problem(16, 4096, 14336), Problem(1, 14336, 4096), Problem(13, 100, 200), Problem(16, 4095, 4096),
              Problem(7, 4096, 4097), Problem(3, 1000, 999, 3), Problem(16, 64, 64), Problem(1, 1, 17),
              Problem(16, 8, 100000), Problem(37, 33, 77, 2), Problem(64, 743, 491)]


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_skinny_mma_variants_verify_on_the_shapes_they_serve(layout):
    from kernels_corpus.families import skinny_mma

    variants = skinny_mma.variants()
    problems = [[Problem(p.N, p.M, p.K, p.batch, layout) if v["swap"] else Problem(p.M, p.N, p.K, p.batch, layout)
                 for p in SKINNY_MMA] for v in variants]
    assert not failures_on_own_shapes(skinny_mma, variants, problems)


# The tensor-core short-K family's own shapes: odd N (every row at another offset mod 8), N below 8,
# batch entries that start off their alignment (odd M * N), K at and just past each KMAX's lower end,
# odd K (A's realigned loads), M = 1, several row CTAs, and past KMAX (the slow path); every variant
# verifies on all of them.
SMALL_K_MMA = [Problem(1419, 14848, 64), Problem(37, 301, 17, 2), Problem(300, 70, 64, 1), Problem(19, 5, 33, 3),
               Problem(1, 130, 32), Problem(3657, 15505, 45), Problem(64, 2688, 64, 46), Problem(9711, 3, 59),
               Problem(129, 257, 200)]


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_small_k_mma_variants_verify_on_the_shapes_they_serve(layout):
    from kernels_corpus.families import small_k_mma

    variants = small_k_mma.variants()
    problems = [[Problem(p.M, p.N, p.K, p.batch, layout) for p in SMALL_K_MMA]] * len(variants)
    assert not failures_on_own_shapes(small_k_mma, variants, problems)


# The mma.sync split-K kernels' own shapes: small outputs with long K and odd pitches (both operands
# through the register loads), one k tile a split and splits left empty (28 k tiles over 16), a K tail,
# an odd K in TN, batch, aligned rows (cp.async); every split variant verifies on all of them.
MMA_SPLIT = [Problem(128, 81, 1745), Problem(143, 704, 305), Problem(67, 73, 4480), Problem(192, 89, 883, 2),
             Problem(128, 96, 1024), Problem(33, 130, 600), Problem(17, 9, 2049, 3)]


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_mma_sync_split_variants_verify_on_the_shapes_they_serve(layout):
    from kernels_corpus.families import mma_sync

    variants = [v for v in mma_sync.variants() if v["split_k"] > 1]
    problems = [[Problem(p.M, p.N, p.K, p.batch, layout) for p in MMA_SPLIT]] * len(variants)
    assert len(variants) > 50
    assert not failures_on_own_shapes(mma_sync, variants, problems)


# Stream-K's own shapes: a part-filled last wave with a K tail (160 tiles of 128 x 256 on 132 SMs), few
# tiles and a long K (each tile split 8 ways, contributors in the middle of a tile), ragged edges, batch,
# and K of one k tile or less, where nothing is split; then pitches TMA refuses (odd K, odd N), for the
# variants behind the staged loader. Each variant runs on every shape its tensor maps can describe.
STREAMK = [Problem(2000, 2432, 1000), Problem(128, 512, 7616), Problem(200, 136, 5000), Problem(130, 136, 4096, 3),
           Problem(4097, 72, 264), Problem(1000, 1000, 64), Problem(64, 264, 8), Problem(1000, 1000, 1001),
           Problem(200, 136, 5001), Problem(2000, 2431, 1000), Problem(128, 517, 7616), Problem(130, 136, 4097, 3)]


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_streamk_variants_verify_on_the_shapes_they_serve(layout):
    """Every stream-K variant verifies (the harness also holds it to leaving its workspace zero)."""
    from hgemm.candidate import parse_candidate
    from hgemm.library import tma_compatible
    from kernels_corpus.families import wgmma

    variants = [v for v in wgmma.variants() if v.get("streamk")]
    shapes = [Problem(p.M, p.N, p.K, p.batch, layout) for p in STREAMK]
    problems = [[p for p in shapes if tma_compatible(parse_candidate(wgmma.render(v)), p)] for v in variants]
    assert len(variants) == len(wgmma.STREAMK_TILES) + 3 * len(wgmma.STREAMK_STAGED_TILES)
    assert all(len(ps) >= 4 for ps in problems)
    assert not failures_on_own_shapes(wgmma, variants, problems)


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_streamk_verifies_at_any_grid(layout):
    """A stream-K kernel splits by gridDim. On grids smaller than the spec's (a GPU with fewer SMs) the
    splits differ and the owners wait on contributors still computing: every launch is right, three
    times over on each grid, and leaves its workspace zero."""
    import torch

    from benchmarks.streamk.profile import launcher
    from hgemm.evaluate import GemmEvaluator
    from hgemm.verify import check_output, reference

    ev = GemmEvaluator()
    cases = [(Problem(512, 512, 512, 16, layout), "wgmma_128x128x64_c1_s5_g8_stk8_es"),
             (Problem(2455, 3840, 7680, 1, layout), "wgmma_128x192x64_c2_s4_g8_stk8_es"),
             (Problem(128, 512, 7616, 1, layout), "wgmma_64x64x64_c1_s6_g8_stk8_es")]
    failures = []
    for problem, name in cases:
        gen = torch.Generator(device="cuda").manual_seed(1)
        A = torch.randn(problem.a_shape, device="cuda", generator=gen).half()
        B = torch.randn(problem.b_shape, device="cuda", generator=gen).half()
        ref = reference(A, B, problem.layout)
        C = torch.empty(problem.c_shape, dtype=torch.float16, device="cuda")
        kernel, buf, (grid, block, smem), W, _ = launcher(ev, name, problem, A, B, C)
        for g in (grid[0], 120, 100, 64, 33):
            for rep in range(3):
                C.fill_(float("nan"))
                kernel.launch((g, 1, 1), block, buf, smem)
                torch.cuda.synchronize()
                report = check_output(C, *ref, problem.K)
                if not report.ok or bool((W.view(torch.int16) != 0).any()):
                    failures.append(f"{problem.key} {name} grid {g} launch {rep}: {report.detail or 'workspace left non-zero'}")
    assert not failures, "\n".join(failures)

"""A cost model of the seed families' kernels, fitted to what the tunes measured: the `cost` dispatch
of hgemm.library ranks every library kernel that can run an unseen shape by it.

The model of a kernel's time on a problem is linear in a few terms its parameters and the shape give
(`features`), with one set of non-negative coefficients per family, fitted by non-negative least squares
on relative error over every kernel time the tunes recorded:
- a constant: launch and prologue;
- DRAM bytes: A and B read once, C written once (the skinny tensor-core kernel's wide operand once
  a chunk of its CTAs' rows);
- split-K partial sums: workspace bytes (mma_sync, skinny: fp32 partials written and read back), and
  the skinny tensor-core kernel's fp32 tile a CTA reduced across its cluster (with it, in
  hgemm.dispatch_eval's leave-one-out over the pipeline's tunes, the cost rule's pick on that family's
  42 tuned shapes takes 1.065x the winner's time in geomean, against 1.105x without);
- the busiest SM's tensor-core work: waves of output tiles (tiles x split over the CTAs that run at
  once) x the work of one tile's share of K. This term is why a shape with few tiles and a long K wants
  split-K, and why a tile that leaves most of a last wave idle loses, which no nearby tuned shape may show;
  for a stream-K kernel, the busiest CTA's whole tiles and its share of the split tiles' k tiles
  (streamk_work), with its partial sums in the split-K term;
- L2-to-SM bytes: every tile's share of A and B rows (small tiles re-read the operands more often; a
  2-CTA wgmma cluster's shared A or B tile counts once for the two;
  a narrow-N kernel's CTAs each stage all of B; the skinny tensor-core kernel's column blocks each read
  all of A);
- the busiest SM's shared-memory reads: each warp (mma_sync) or consumer warpgroup (wgmma) reads its
  rows of A and columns of B for every k step, so a narrow warp tile (16 x 32) reads far more per
  flop than a square one, which the tile work alone does not tell apart;
- latency: the K-steps one CTA runs in sequence (a deep K at few tiles is a chain of dependent steps;
  two CTAs an SM run two such chains side by side, each half as long);
  for the narrow, short-K (both) and skinny tensor-core kernels, waves times the memory waits a lane
  takes in sequence;
- staged bytes: the operand copies the staged loader makes before its mainloop;
- misaligned loads: the busiest SM's operand elements that the mma.sync template (mma_sync,
  batched_small) reads through registers because their rows are not 16-byte aligned, where cp.async
  cannot go (`misaligned_rows`). Per k step that is a guarded load, a realignment and a store to shared
  memory, with at most one tile fetched ahead, so a long K on odd pitches costs far more than the
  same K aligned; wgmma reads such an operand from a staged copy instead (staged bytes). For the skinny
  tensor-core kernels with `elem` loads, the elements they read a 2-byte load at a time on such rows
  (without it, in hgemm.dispatch_eval's leave-one-out over the pipeline's four tunes, the cost rule's
  pick on the 59 shapes that family won took 1.076x the winner's time, most often the `elem` twin of a
  winning `pair` kernel; with it 1.036x);
- the epilogue: the busiest SM's output elements that the tile kernels (wgmma, mma_sync,
  batched_small) store after each tile's mainloop, in sequence with it. On a short K that store is most
  of a tile's time, and the DRAM term, which spreads C's bytes over the whole GPU, cannot tell a tile that
  leaves SMs idle from one that does not (without it, in hgemm.dispatch_eval's leave-one-out over the
  pipeline's tunes but the deep-split one, the short-K tensor-core family's among them, the cost rule's pick took 1.049x the winner's
  time, up to 3.25x on K = 64 shapes where it ranked a wgmma tile at half its measured time; with it 1.032x);
- the grid barrier: a staged wgmma kernel's copy phase ends at a one-shot barrier of the whole grid
  (hgemm/include/hgemm/staged_loader.cuh), a wait of fixed length whatever the bytes copied, which the
  staged-bytes term alone spreads over the copies (without it, in the same leave-one-out, 1.032x; with it
  1.027x).
Then each kernel's log ratio of measured to modelled time on the tuned shapes nearest the one asked
about (weighted by 1 / (1 + distance)) corrects the model, shrunk towards the kernel's mean ratio over
all its tuned shapes: a kernel timed on few shapes leans on its mean, one timed nearby on its neighbours.
hgemm.dispatch_eval judges it offline, each tuned shape left out of the fit in turn; `hgemm bench
--library` on shapes no tune saw.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from kernels_corpus.families import FAMILIES, narrow, skinny_mma, small_k, small_k_mma, wgmma

from .params import operand_shape
from .problem import NUM_SMS, Problem

# CTAs of one SM each that run at once, by cluster size: a cluster's CTAs share a GPC
# (benchmarks/split_k/cluster_occupancy.json), so 30 clusters of 4 and 15 of 8 fit, not 33 and 16
CLUSTER_CTAS_AT_ONCE = {1: NUM_SMS, 2: NUM_SMS, 4: 120, 8: 120, 16: 120}
SKINNY_WARPS_PER_SM = 4  # rows of output a skinny kernel's SM works on at once, per row tile
SHRINK = 1.0  # the weight of a kernel's mean log ratio beside its neighbours' weights
FEATURES = ("launch", "dram_bytes", "split_bytes", "tile_work", "l2_bytes", "smem_reads", "latency", "staged_bytes",
            "misaligned_loads", "epilogue", "grid_barrier")


@lru_cache(maxsize=1)
def _by_name() -> dict[str, tuple]:
    return {fam.name(p): (fam, p) for fam in FAMILIES for p in fam.variants()}


def kernel_params(name: str) -> dict | None:
    """A seed-family kernel's parameters from its name; None for a kernel of no family (a model's, a
    reference kernel)."""
    found = _by_name().get(name)
    return found[1] if found else None


def family_text(name: str) -> str | None:
    """A seed-family kernel's candidate text, rendered from its name; None for a kernel of no family."""
    found = _by_name().get(name)
    return found[0].render(found[1]) if found else None


def applicable(name: str, p: Problem) -> bool:
    """Whether the kernel's family counts it among the variants worth timing on p (its `applicable`
    filter, the tune's first cut): the model was fitted on such pairs only, so it ranks no others."""
    found = _by_name().get(name)
    return found is not None and found[0].applicable(found[1], p)


def family(params: dict) -> str:
    if params.get("kind") in ("narrow", "small_k", "skinny_mma", "small_k_mma"):
        return params["kind"]
    if "bm" not in params:
        return "skinny"
    if "consumers" in params:
        return "wgmma"
    return params.get("prefix", "mma_sync")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def misaligned_rows(params: dict, p: Problem) -> tuple[bool, bool]:
    """Whether the mma.sync template (hgemm/include/hgemm/mma_sync_gemm.cuh) reads A, and B, through its
    register path: an operand whose row pitch is not a multiple of 8 halves. A warp tile of more than 32
    accumulators a thread has no path for one aligned and one misaligned operand (MIXED_PATHS), so
    there one misaligned operand sends both."""
    rows = tuple(operand_shape(op, p)[2] % 8 != 0 for op in "AB")
    accumulators = (params["bm"] // params["warps_m"] // 16) * (params["bn"] // params["warps_n"] // 8) * 4
    return (any(rows), any(rows)) if accumulators > 32 else rows


def _skinny_mma_element_loads(params: dict, p: Problem) -> float:
    """The elements a skinny tensor-core kernel with `elem` loads reads a guarded 2-byte load at a time,
    where its vector-loaded rows are not 16-byte aligned: every element of both operands, the wide one
    once a chunk of rows, the atom's rows once a column block. The `pair` variants read the same rows
    as realigned vectors; on aligned rows both take the vector path."""
    if params.get("loads", "elem") != "elem" or skinny_mma.aligned_rows(params, p):
        return 0.0
    rows, wide = skinny_mma.roles(params, p)
    return float(p.batch * p.K * (wide * skinny_mma.row_chunks(params, p) + rows * skinny_mma.column_blocks(params, p)))


def features(params: dict, p: Problem) -> list[float]:
    """The terms of FEATURES for one kernel on one problem (the module docstring says what each is)."""
    split = params.get("split_k", 1)
    dram = 2 * p.batch * (p.M * p.K + p.K * p.N + p.M * p.N)
    if params.get("kind") == "narrow":  # a lane group a walked row, k in sequence; the other operand staged a CTA
        rows, cols = narrow.roles(params, p)
        blocks = _cdiv(cols, params["nb"])  # column blocks, each reading the walked operand again
        ctas = narrow.ctas(params, p)
        chain = narrow.waits(params, p)
        dram += 2 * p.batch * rows * p.K * (blocks - 1)
        return [1.0, dram, 0.0, 0.0, 2.0 * ctas * min(cols, params["nb"]) * p.K, 0.0, chain, 0.0, 0.0, 0.0, 0.0]
    if params.get("kind") in ("small_k", "small_k_mma"):  # C's stores; a warp's rows in sequence, a load of A each step
        fam = small_k if params["kind"] == "small_k" else small_k_mma
        chain = fam.waits(params, p)
        # every column block reads A's rows, every CTA its columns of B
        l2 = 2.0 * p.batch * p.K * (p.M * fam.column_blocks(params, p.N) + p.N * fam.row_ctas(params, p))
        return [1.0, dram, 0.0, 0.0, l2, 0.0, chain, 0.0, 0.0, 0.0, 0.0]
    if params.get("kind") == "skinny_mma":  # the wide operand streamed once; a warp's rounds of loads in sequence
        chain = skinny_mma.waits(params, p)
        # every column block's CTAs read all of the atom's rows (A's, or B's with swap) over K between them
        l2 = 2.0 * p.batch * skinny_mma.roles(params, p)[0] * p.K * skinny_mma.column_blocks(params, p)
        # a split's partial sums: each CTA's 16rg x 8t fp32 tile, reduced through distributed shared memory
        partials = (4.0 * skinny_mma.ctas(params, p) * 16 * skinny_mma.row_groups(params) * 8 * params["t"]
                    if params["split"] > 1 else 0.0)
        # past a CTA's 16rg rows, each further chunk (grid.z) streams the wide operand again
        dram += 2.0 * p.batch * skinny_mma.roles(params, p)[1] * p.K * (skinny_mma.row_chunks(params, p) - 1)
        return [1.0, dram, partials, 0.0, l2, 0.0, chain, 0.0, _skinny_mma_element_loads(params, p), 0.0, 0.0]
    if "bm" not in params:  # skinny: mt output rows a warp, split over K with fp32 atomics
        partials = 4 * p.batch * p.M * p.N * split if split > 1 else 0
        rows = _cdiv(p.M, params["mt"]) * p.batch * split
        chain = _cdiv(rows, NUM_SMS * SKINNY_WARPS_PER_SM) * _cdiv(p.K, split) * params["mt"]
        return [1.0, dram, partials, 0.0, 0.0, 0.0, chain, 0.0, 0.0, 0.0, 0.0]
    bm, bn, bk = params["bm"], params["bn"], params.get("bk", 64)
    k_share = _cdiv(_cdiv(p.K, split), bk) * bk
    tiles = _cdiv(p.M, bm) * _cdiv(p.N, bn) * p.batch
    if "consumers" in params:  # persistent, one CTA an SM (or two); split-K within a cluster, through DSMEM
        per_sm, partials, misaligned = params.get("ctas_per_sm", 1), 0, (False, False)
        at_once = CLUSTER_CTAS_AT_ONCE[params.get("cluster", 1) * split] * per_sm
        readers, rows, cols = params["consumers"], bm // params["consumers"], bn
        # a 2-CTA cluster's shared operand tile leaves L2 once for both CTAs (TMA multicast)
        cl = params.get("cluster", 1)
        a_rows, b_cols = (bm / cl, bn) if params.get("multicast") == "A" else (bm, bn / cl)
    else:  # min_blocks CTAs share an SM; split-K through an fp32 workspace
        per_sm = params.get("min_blocks", 1)
        at_once = NUM_SMS * per_sm
        partials = 8 * p.batch * p.M * p.N * split if split > 1 else 0
        readers, rows, cols = params["warps_m"] * params["warps_n"], bm // params["warps_m"], bn // params["warps_n"]
        misaligned = misaligned_rows(params, p)
        a_rows, b_cols = bm, bn
    staged = sum(4 * p.batch * (p.M * p.K if op == "A" else p.K * p.N)
                 for op in (params.get("stage", "") if params.get("loader") == "staged" else ""))
    barrier = float(params.get("loader") == "staged")
    if params.get("streamk"):  # the busiest CTA: its whole tiles, then its share of the split tiles' k tiles
        units, partials = streamk_work(params, tiles, _cdiv(p.K, bk), bm * bn)
        return [1.0, dram, partials, bm * bn * units * bk, tiles * (bm + bn) * k_share,
                readers * (rows + cols) * units * bk, float(units), staged, 0.0, _cdiv(tiles, NUM_SMS) * bm * bn, barrier]
    waves = _cdiv(tiles * split, at_once)
    return [1.0, dram, partials, waves * per_sm * bm * bn * k_share, tiles * split * (a_rows + b_cols) * k_share,
            waves * per_sm * readers * (rows + cols) * k_share, waves * k_share / bk, staged,
            waves * per_sm * (bm * misaligned[0] + bn * misaligned[1]) * k_share, waves * per_sm * bm * bn, barrier]


def streamk_split(params: dict, tiles: int, nk: int, ctas: int = NUM_SMS) -> tuple[int, int]:
    """(remainder tiles split, ways) of a stream-K grid of `ctas` CTAs (hgemm/streamk.cuh): the tiles
    past the last whole wave, each over the CTAs that round leaves idle; (0, 1) where fewer than two are."""
    rest = 0 if nk == 0 else (tiles if tiles < ctas else tiles % ctas)
    ways = min(params["streamk"], nk // wgmma.STREAMK_MIN_UNITS, ctas // rest if rest else 0)
    return (rest, ways) if ways >= 2 else (0, 1)


def streamk_work(params: dict, tiles: int, nk: int, tile_elems: int) -> tuple[int, float]:
    """The k tiles the busiest CTA of a stream-K grid runs (every CTA the whole waves of tiles, then a
    share of a split tile's k tiles) and the bytes of partial sums (each split tile's contributors
    write a slot of fp32 sums, its owner reads and clears them)."""
    rest, ways = streamk_split(params, tiles, nk)
    if not rest:   # nothing split: the whole-tile kernel's rounds
        return _cdiv(tiles, NUM_SMS) * nk, 0.0
    return (tiles - rest) // NUM_SMS * nk + _cdiv(nk, ways), 12.0 * rest * (ways - 1) * tile_elems


def streamk_owner_bytes(params: dict, tiles: int, nk: int, tile_elems: int) -> float:
    """The bytes a split tile's owner reads and clears on its own SM after its mainloop: (ways - 1)
    slots of fp32 sums, a serial tail the busiest CTA's k tiles do not show."""
    rest, ways = streamk_split(params, tiles, nk)
    return 8.0 * (ways - 1) * tile_elems if rest else 0.0


class CostModel:
    """The fitted model and the measured-over-modelled log ratios it is corrected by."""

    def __init__(self, measured: dict[str, dict[str, float]]):
        """measured: problem key -> {kernel name: µs} (verified kernels); kernels of no family are left out."""
        from scipy.optimize import nnls  # only a fit needs it (a library serving exact shapes never fits)

        rows: dict[str, list[tuple[str, str, list[float], float]]] = {}
        for key, times in measured.items():
            p = Problem.from_key(key)
            for name, us in times.items():
                params = kernel_params(name)
                if params is not None and us > 0:
                    rows.setdefault(family(params), []).append((key, name, features(params, p), us))
        self.coef: dict[str, np.ndarray] = {}
        for fam, fam_rows in rows.items():
            x = np.array([r[2] for r in fam_rows])
            t = np.array([r[3] for r in fam_rows])
            scale = np.where(x.max(axis=0) > 0, x.max(axis=0), 1.0)  # columns of one magnitude for nnls
            c, _ = nnls(x / scale / t[:, None], np.ones(len(t)))     # relative error: each row over its time
            self.coef[fam] = c / scale
        self.ratios: dict[str, dict[str, float]] = {}  # kernel -> {problem key: log(measured / modelled)}
        for fam, fam_rows in rows.items():
            for key, name, x, us in fam_rows:
                self.ratios.setdefault(name, {})[key] = math.log(us / self._model(fam, x))
        self.mean = {name: sum(r.values()) / len(r) for name, r in self.ratios.items()}

    def _model(self, fam: str, x: list[float]) -> float:
        return max(float(np.dot(self.coef[fam], x)), 1e-3)

    def model_us(self, name: str, p: Problem) -> float | None:
        """The fitted model's time of kernel `name` on p, uncorrected; None for a kernel of no fitted family."""
        params = kernel_params(name)
        if params is None or family(params) not in self.coef:
            return None
        return self._model(family(params), features(params, p))

    def log_estimate(self, name: str, p: Problem, near: list[tuple[float, str]]) -> float | None:
        """log µs of kernel `name` on p: the model's, corrected by the kernel's log ratios on `near`
        ((distance, problem key) of the nearest tuned shapes) shrunk towards its mean ratio. None for a
        kernel the fit has no measurement of."""
        modelled = self.model_us(name, p)
        if modelled is None or name not in self.mean:
            return None
        ratios = self.ratios[name]
        num, den = SHRINK * self.mean[name], SHRINK
        for d, key in near:
            if key in ratios:
                num, den = num + ratios[key] / (1 + d), den + 1 / (1 + d)
        return math.log(modelled) + num / den

    def rank(self, names, p: Problem, near: list[tuple[float, str]]) -> list[str]:
        """`names` that are `applicable` to p and have an estimate there, fastest estimate first (ties
        keep the order of `names`)."""
        estimates = [(est, i, name) for i, name in enumerate(names)
                     if applicable(name, p) and (est := self.log_estimate(name, p, near)) is not None]
        return [name for _, _, name in sorted(estimates)]

    def pick(self, names, p: Problem, near: list[tuple[float, str]]) -> str | None:
        """Of `names`, the kernel with the lowest estimate on p (rank's first); None if none has one."""
        ranked = self.rank(names, p, near)
        return ranked[0] if ranked else None

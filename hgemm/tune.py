"""`hgemm tune`: evaluate the seed families' variants per shape and keep the fastest verified kernel.

Pruning before any GPU time: the family's own `applicable()` filter, a wave/tile-efficiency estimate
that keeps the few most promising tile shapes of each family per shape, and the compiler's resource
report (a variant that fails to compile or spills is dropped). The survivors of one shape are
verified and timed together with the baselines (one interleaved run), so every winner is measured
against the strongest baseline in the same run.

Output folder: table.json (the dispatch table), kernels/<name>.cu (the winners and the reference
kernels), bench.json (the raw evaluation in `hgemm bench` format), summary.md, goals.md (against the
per-class targets of hgemm.summary).

Resumable (`state_dir`): problems are evaluated in chunks, each problem's result saved as it comes
with the settings it was measured under, and a tune with a wall-clock budget stops between chunks.
Run again with the same settings (options, arch, candidate texts, device headers, GPU model) and it
evaluates only the problems without a saved result; the table always holds every saved problem, and
says how many are still to do (`pending`). A wide shape sample is tuned that way over several device
calls.

Beside a library (`beside`): each shape's kernel in that library is timed in the same run as the
shortlist (as `beside:<name>`, never chosen), and the table entry records it, so a re-tune says shape
by shape how its winner compares with the kernel it would replace.

Timed on every shape too, and listed with their speedups under each entry's "references": the
fallback (FALLBACK, the family kernel for shapes that no entry fits) and the tensor-core reference
kernels (REFERENCES), the raw-CUDA kernels a small model writes whole, which rl_hgemm shows beside the
tuned winners as measured context.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from kernels_corpus.families import FAMILIES, mma_sync, narrow, skinny_mma, small_k, small_k_mma, wgmma

from .bench import run_bench
from .candidate import parse_spec
from .compile import detect_arch, include_hash
from .cost import CLUSTER_CTAS_AT_ONCE, family, kernel_params, streamk_owner_bytes, streamk_work
from .entry import EvalOptions
from .envinfo import environment, gpu_info
from .files import UnreadableFile, config_hash, read_user_text, write_json
from .library import DEFAULT_DISPATCH, Library, timed_ratios, tune_results
from .params import operand_shape
from .pool import compile_all
from .problem import NUM_SMS, Problem
from .summary import BESIDE, beside_markdown, goals_markdown, markdown

# The table's fallback: an mma.sync family kernel that takes any M, N, K, batch and both layouts
# (predicated edges, the pair-load path for rows that are not 16-byte aligned, no TMA, no workspace).
FALLBACK = {"bm": 128, "bn": 128, "bk": 32, "warps_m": 2, "warps_n": 4, "min_blocks": 2, "stages": 4,
            "split_k": 1, "group_m": 8, "misaligned_loads": "pair"}
FALLBACK_NAME = mma_sync.name(FALLBACK)
# kernels_corpus/reference/<stem>.cu timed on every shape as reference_<stem>; naive and smem_tiled are
# left out, as they take seconds a launch at 16384^3 and are never close
REFERENCES = ("mma_sync", "mma_pipelined")
DEFAULT_TILES = 5  # distinct tile shapes per family and problem
# A shortlist's (or a first-call search's) first wgmma tiles are timed in both forms, whole-tile and
# stream-K, where stream-K applies: it beat the pipeline library's choice on 10 of 42 shapes where the
# last round is part-filled or the tiles are few (benchmarks/streamk/), and the estimate tells the faster
# of a stream-K kernel and its whole-tile twin on 83% of the pairs timed (benchmarks/streamk/fit_estimate.py).
STREAMK_SIBLINGS = 2
# On small outputs a first-call search's (or a shortlist's) first mma.sync kernel is timed at the 32 x 32
# tile too, at its ring and split (kernels_corpus.families.mma_sync.small_sibling): on ten shapes of at
# most 2^18 output elements that tile beat the 16 x 128 and 64 x 64 tiles at the same splits by
# 1.13-1.42x (benchmarks/small_tiles/). The estimate ranks it first on most such shapes, but the cost
# model the search ranks by leaves out every kernel no tune has timed, and the tunes time this tile only
# on the deep-split class (benchmarks/deep_split/): the search kept it on 25 of 113 held-out shapes.
SMALL_TILE_SIBLINGS = 1
# A first-call search's first two-consumer wgmma kernels are timed with the other of the parked and the
# bulk-copy epilogues too (kernels_corpus.families.wgmma.epilogue_twin): the bulk copies ran 1.04-1.18x the
# parked epilogue on one-wave grids and 0.96-1.10x on many (benchmarks/bulk_store/), and where C's rows are
# not 16-byte aligned that kernel stores them from registers, which the search kept on 1664 x 1569 x 512
# TN at 0.82x the parked form's time (benchmarks/autotune/). The cost model ranks only what its tunes
# timed, and ranks each form by the shapes it was timed on: the default grid's search timed the bulk
# forms on the 16 shapes where they won, and the cost model then ranked six of them among its first 8 on
# 7639 x 4023 x 1728 TN, leaving out the parked 128 x 256 that is fastest there (benchmarks/torch_compile/).
EPILOGUE_SIBLINGS = 2
# ... and its first wgmma kernels with the parked or the bulk-copy epilogue with the TMA tensor stores of C
# as well (kernels_corpus.families.wgmma.tensor_twin): on two-consumer tiles 1.10-1.24x the bulk copies on
# short-K shapes and 1.02-1.07x on one-wave ones (benchmarks/short_k_stores/), on one-consumer tiles
# 0.99-1.19x the parked epilogue (benchmarks/one_consumer_stores/), and no tune had timed them to rank them by.
TENSOR_STORE_SIBLINGS = 2
SMALL_OUTPUT = 1 << 18   # output elements (M * N * batch) up to which the 32 x 32 sibling is timed
ALL_TILES = 1000  # more tile shapes than any family has: every one that applies
DEFAULT_TOP = 8  # cost_shortlist: the variants a shape times when the cost model ranks them
DEPTH = ("stages", "unroll")  # a variant's pipeline depth, apart from its tile shape
# A stream-K owner's serial tail (hgemm.cost.streamk_owner_bytes) in estimate units a byte: fitted to
# 144 stream-K / whole-tile pairs timed on an H100 (benchmarks/streamk/fit_estimate.py). With it the
# estimate tells which of the two is faster on 83% of them (53% without).
STREAMK_OWNER_WORK_PER_BYTE = 88.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def estimate(params: dict, problem: Problem) -> float:
    """A relative cost for ranking tensor-core tile variants: waves of CTAs times the work of one CTA,
    discounted by the tile's arithmetic intensity (small tiles re-read operands more often)."""
    if params.get("kind") == "narrow":  # waves times a lane's memory waits in sequence, and the FMAs
        cols = narrow.roles(params, problem)[1]
        return (float(narrow.waits(params, problem))
                + narrow.ctas(params, problem) * min(cols, params["nb"]) * problem.K / (NUM_SMS * 256))
    if params.get("kind") == "small_k":  # waves times a warp's steps in sequence
        return float(small_k.waits(params, problem))
    if params.get("kind") == "small_k_mma":
        return float(small_k_mma.waits(params, problem))
    if params.get("kind") == "skinny_mma":  # waves times a warp's rounds of loads in sequence
        return float(skinny_mma.waits(params, problem))
    if "bm" not in params:  # skinny family: bandwidth-bound, rank by rows per CTA and split
        return float(_cdiv(problem.M, params.get("mt", 1))) / max(1, params.get("split_k", 1))
    bm, bn = params["bm"], params["bn"]
    split = params.get("split_k", 1)
    ctas = _cdiv(problem.M, bm) * _cdiv(problem.N, bn) * problem.batch * split
    intensity = (bm * bn / (bm + bn)) / (128 * 256 / 384)
    # A staged wgmma kernel first copies the operands TMA refuses, ~10% of the kernel's time for each
    # (at 4096^3: 22 us over the plain kernel's 203, for A or B alone; benchmarks/misaligned_loaders/).
    # Without this, copying both ranks level with copying the one that needs it, and the list order
    # picks the former.
    staged = 1 + 0.1 * len(params.get("stage", "")) if params.get("loader") == "staged" else 1
    if params.get("streamk"):   # the busiest CTA's k tiles (whole waves and a share of the rest), the partials
        units, partial_bytes = streamk_work(params, ctas, _cdiv(problem.K, 64), bm * bn)
        tail = streamk_owner_bytes(params, ctas, _cdiv(problem.K, 64), bm * bn)
        return (bm * bn * units * 64 / min(1.0, intensity) * staged + partial_bytes / 3
                + STREAMK_OWNER_WORK_PER_BYTE * tail)
    slots = NUM_SMS * max(1, params.get("min_blocks", 1))
    if "consumers" in params:   # wgmma: one CTA an SM, clusters of cluster x split_k CTAs within a GPC
        slots = CLUSTER_CTAS_AT_ONCE[params.get("cluster", 1) * split]
    waves = _cdiv(ctas, slots)
    work = bm * bn * _cdiv(problem.K, split) / max(1, params.get("min_blocks", 1))
    cost = waves * work / min(1.0, intensity) * staged
    # Two CTAs an SM (wgmma `ctas_per_sm: 2`, where the tiles outnumber the SMs) measured 1.03-1.46x
    # the same tile at one (benchmarks/two_ctas/): the waves of the one-CTA grid, less the latency the
    # second CTA hides; ranked ahead of its twin.
    if params.get("ctas_per_sm", 1) > 1:
        cost *= 0.85
    # 2-CTA clusters that multicast B (wgmma `cluster: 2`) measured 1.16-1.44x the same tile where an
    # operand's rows are 16-byte but not 128-byte multiples (4096x4104x4104, 8192x8200x8200), and
    # 0.94-1.01x elsewhere (benchmarks/cluster/): first on the former, after the plain tile
    # on the latter.
    if params.get("cluster", 1) > 1:
        cost *= 0.85 if _pitch_off_128_bytes(problem) else 1.02
    return cost + (split - 1) * bm * bn * 4  # split-K reduction traffic


def _depth(params: dict) -> int:
    return max(params.get(k, 0) for k in DEPTH)


def _split(params: dict) -> bool:
    """A kernel that splits a tile's K over CTAs: cluster split-K or stream-K."""
    return params.get("split_k", 1) > 1 or bool(params.get("streamk"))


def _staged_split(params: dict) -> bool:
    return params.get("loader") == "staged" and _split(params)


def _pitch_off_128_bytes(problem: Problem) -> bool:
    """An operand's rows start off 128-byte lines: every TMA box row then spans one more sector."""
    return any(operand_shape(op, problem)[2] % 64 for op in "AB")


def shortlist(problem: Problem, tiles_per_family: int = DEFAULT_TILES, stages_per_tile: int = 2) -> list[tuple[str, str]]:
    """(name, text) of the variants worth timing on this problem: per family, the best-ranked distinct
    tile shapes, each with its deepest pipelines (the estimate cannot see latency hiding, the GPU can):
    cp.async or TMA stages, or the skinny kernels' loads in flight a thread; a two-consumer wgmma tile
    with both its parked and its bulk-copy epilogue."""
    chosen = []
    for fam in FAMILIES:
        by_tile: dict[tuple, list] = {}
        for p in fam.variants():
            if not (fam.applicable(p, problem) and _layout_ok(fam.render(p), problem.layout)):
                continue
            # a bulk-copy or tensor-store epilogue counts as the same tile as its parked twin
            # (wgmma.epilogue_twin, wgmma.tensor_twin): the estimate ties them, so a tile's kernels are
            # every form at its deepest rings
            key = dict(p, epilogue="smem") if p.get("epilogue") in ("bulk", "bulk_tensor") else p
            tile = tuple(sorted((k, v) for k, v in key.items() if k not in DEPTH))
            by_tile.setdefault(tile, []).append(p)
        ranked = sorted(by_tile.values(), key=lambda ps: estimate(ps[0], problem))
        # Every narrow variant that applies is timed (at most 24, kernels of microseconds): the estimate
        # ranked the fastest first on 3 of the 6 shapes of benchmarks/narrow/expected.json, and its first
        # took 1.78x the fastest's time on 768x7x5312.
        # The short-K kernels (at most 6 apply, 3 on tensor cores) and the skinny tensor-core ones (21)
        # likewise: the tune has no measurement of them to fit an estimate to yet.
        picked = ranked if fam in (narrow, small_k, skinny_mma, small_k_mma) else ranked[:tiles_per_family]
        # A staged split-K kernel pays the operand copies on a mainloop a fraction as long as an unsplit
        # kernel's, which the estimate (a tenth of the time a copy, from unsplit kernels) cannot see:
        # it is timed beside the best unsplit tile, not in its place.
        if any(_staged_split(ps[0]) for ps in picked) and all(_split(ps[0]) for ps in picked):
            picked += [ps for ps in ranked if not _split(ps[0])][:1]
        for ps in sorted(picked, key=ranked.index):
            depths = sorted({_depth(p) for p in ps}, reverse=True)[:stages_per_tile]
            ps = sorted((p for p in ps if _depth(p) in depths), key=lambda p: -_depth(p))
            chosen += [(fam.name(p), fam.render(p)) for p in ps]
    names = [name for name, _ in chosen]
    return (chosen + streamk_siblings(names, problem)[:STREAMK_SIBLINGS]
            + small_tile_siblings(names, problem)[:SMALL_TILE_SIBLINGS])


def streamk_siblings(names: list[str], problem: Problem) -> list[tuple[str, str]]:
    """(name, text) of the other form of each wgmma kernel among `names`, in their order, where stream-K
    applies to the problem: a whole-tile kernel's stream-K variant (kernels_corpus.families.wgmma
    .streamk_sibling), a stream-K kernel's whole tile (wgmma.whole_tile) where the family has it; each in
    the problem's layout and not named already. A caller times the first STREAMK_SIBLINGS of them."""
    out: dict[str, str] = {}
    for params in filter(None, map(kernel_params, names)):
        if family(params) != "wgmma":
            continue
        if params.get("streamk"):
            streamk, other = params, wgmma.whole_tile(params)
        else:
            streamk = other = wgmma.streamk_sibling(params)
        if streamk is None or not wgmma.applicable(streamk, problem):
            continue
        other_name, text = wgmma.name(other), wgmma.render(other)
        if other_name not in names and kernel_params(other_name) is not None and _layout_ok(text, problem.layout):
            out.setdefault(other_name, text)
    return list(out.items())


def small_tile_siblings(names: list[str], problem: Problem) -> list[tuple[str, str]]:
    """(name, text) of the 32 x 32 mma.sync kernel at the ring and split of each mma.sync kernel among
    `names`, in their order, on problems of at most SMALL_OUTPUT output elements, where it applies, in
    the problem's layout and not named already. A caller times the first SMALL_TILE_SIBLINGS of them."""
    if problem.M * problem.N * problem.batch > SMALL_OUTPUT:
        return []
    return _siblings(names, problem, mma_sync, mma_sync.small_sibling)


def epilogue_siblings(names: list[str], problem: Problem) -> list[tuple[str, str]]:
    """(name, text) of the other-epilogue twin (parked or bulk-copy) of each two-consumer wgmma kernel among
    `names`, in their order, where it applies, in the problem's layout and not named already. A caller
    times the first EPILOGUE_SIBLINGS of them."""
    return _siblings(names, problem, wgmma, wgmma.epilogue_twin)


def tensor_store_siblings(names: list[str], problem: Problem) -> list[tuple[str, str]]:
    """(name, text) of the tensor-store twin of each wgmma kernel among `names` with the parked epilogue
    or, with two consumers, the bulk copies, in their order, where it applies (C's rows 16-byte aligned), in
    the problem's layout and not named already. A caller times the first TENSOR_STORE_SIBLINGS."""
    return _siblings(names, problem, wgmma, wgmma.tensor_twin)


def _siblings(names: list[str], problem: Problem, fam, sibling) -> list[tuple[str, str]]:
    """(name, text) of sibling(params) for each kernel of the family module `fam` among `names`, in their
    order, where the sibling exists and applies, in the problem's layout and not named already."""
    out: dict[str, str] = {}
    for params in filter(None, map(kernel_params, names)):
        if family(params) != fam.__name__.rsplit(".", 1)[-1] or (twin := sibling(params)) is None:
            continue
        name, text = fam.name(twin), fam.render(twin)
        if name not in names and fam.applicable(twin, problem) and _layout_ok(text, problem.layout):
            out.setdefault(name, text)
    return list(out.items())


def cost_shortlist(problem: Problem, library: Library, top: int) -> list[tuple[str, str]]:
    """(name, text) of the `top` variants the library's cost model ranks fastest on the problem
    (cost_ranking). On 46 shapes no tune saw, where every variant was timed (benchmarks/search_headroom/),
    the best of the first 8 took 0.90x the library's choice's time, and the best of all 0.85x."""
    return cost_ranking(problem, library)[:top]


def cost_ranking(problem: Problem, library: Library) -> list[tuple[str, str]]:
    """(name, text) of every variant of every family that applies to the problem, fastest first as the
    library's cost model (hgemm.cost, fitted to its tunes' measurements and corrected by the shape's
    nearest tuned neighbours) ranks them. A variant no tune has timed has no correction to rank it by
    and is left out."""
    every = dict(shortlist(problem, tiles_per_family=ALL_TILES))
    ranked = library.cost_model().rank(list(every), problem, library.neighbours(problem))
    return [(name, every[name]) for name in ranked]


def family_firsts(ranked: list[tuple[str, str]], names: list[str]) -> list[tuple[str, str]]:
    """(name, text) of the first variant in `ranked` of each family that none of `names` belongs to, in
    ranked order. The cost model compares kernels of one family better than kernels of two (its terms are
    fitted across families, its corrections per kernel), so a family's best kernel can rank behind the
    first K of another's: on 16 of the sample's first 30 held-out shapes some family's first kernel ranks
    past the first 8 (tests/test_autotune.py), and the search times it as well."""
    have = {family(params) for params in map(kernel_params, names) if params}
    out: dict[str, tuple[str, str]] = {}
    for name, text in ranked:
        params = kernel_params(name)
        if params and (fam := family(params)) not in have:
            out.setdefault(fam, (name, text))
    return list(out.values())


def _layout_ok(text: str, layout: str) -> bool:
    return layout in parse_spec(text).layouts


def resources_ok(info: dict) -> bool:
    """Compiled, and without spills in any layout: local-memory traffic makes a kernel a poor library
    choice even when it happens to win one measurement."""
    if info.get("status") != "compiled":
        return False
    return not any(res["spill_stores"] or res["spill_loads"] for res in info.get("resources", {}).values())


def _saved(state_dir: Path | None, problem: Problem, settings: str) -> dict | None:
    """A problem's result from an earlier call with the same settings, else None."""
    path = state_dir / f"{problem.key}.json" if state_dir else None
    if path is None or not path.is_file():
        return None
    record = json.loads(path.read_text())
    return record["result"] if record.get("settings") == settings else None


def seed_state(state_dir: str | Path, folder: str | Path) -> int:
    """Saved per-shape results for a resumed tune, from an earlier tune's folder as committed: its
    settings.json (the settings each shape was measured under) and bench.json or bench.json.gz (the
    results). A shape already saved in state_dir is left alone; the tune reuses a seeded result only
    where its settings are today's (same options, arch and candidate texts), so a seed from a tune of
    other kernels is measured again. Returns how many shapes were seeded."""
    folder, state = Path(folder), Path(state_dir)
    settings = json.loads(read_user_text(folder / "settings.json"))
    results = tune_results(folder)
    if results is None:
        raise UnreadableFile(f"{folder}: no bench.json or bench.json.gz to resume from")
    state.mkdir(parents=True, exist_ok=True)
    seeded = 0
    for pr in results.get("problems", []):
        key = Problem.from_dict(pr["problem"]).key
        path = state / f"{key}.json"
        if key in settings and not path.is_file():
            write_json(path, {"settings": settings[key], "result": pr})
            seeded += 1
    return seeded


def tune(problems: list[Problem], out_dir: str | Path, options: EvalOptions | None = None,
         tiles_per_family: int = DEFAULT_TILES, arch: str | None = None, progress: bool = True,
         state_dir: str | Path | None = None, max_seconds: float | None = None, chunk: int = 16,
         beside: Library | None = None, ranked_by: Library | None = None, top: int = DEFAULT_TOP) -> dict:
    """Evaluate shortlisted variants on every problem; write the dispatch table and the winners.
    state_dir: save each problem's result there and skip problems already saved under the same
    settings; max_seconds: the call's budget, compiles included: a chunk of `chunk` problems starts
    only if the slowest chunk so far would still end within it (needs state_dir);
    beside: a library whose choice for each problem is timed in the same run, for comparison;
    ranked_by: a library whose cost model picks each problem's shortlist, its `top` variants
    (cost_shortlist), in place of the per-family estimate's `tiles_per_family` tile shapes."""
    started = time.monotonic()
    out_dir = Path(out_dir)
    (out_dir / "kernels").mkdir(parents=True, exist_ok=True)
    options = options or EvalOptions()
    state = Path(state_dir) if state_dir else None
    root = Path(__file__).resolve().parent.parent
    references = {f"reference_{stem}": (root / "kernels_corpus/reference" / f"{stem}.cu").read_text()
                  for stem in REFERENCES} | {FALLBACK_NAME: mma_sync.render(FALLBACK)}
    # one bench over the union of shortlists: each problem's job carries only its own shortlist
    per_problem = {p: cost_shortlist(p, ranked_by, top) if ranked_by else shortlist(p, tiles_per_family)
                   for p in problems}
    union = {name: text for lst in per_problem.values() for name, text in lst} | references
    current = {p: BESIDE + beside.lookup(p).name for p in problems} if beside else {}
    union |= {name: beside.candidate(name[len(BESIDE):]).source for name in set(current.values())}
    # prune by the resource report before any GPU time (compiles are cached, so run_bench reuses them)
    layouts = tuple(sorted({p.layout for p in problems}))
    named = sorted(union.items())
    infos = {name: info for (name, _), (_, info) in zip(named, compile_all(named, layouts, arch, sass=True))}
    pruned = {name for name, info in infos.items() if not resources_ok(info)}
    wanted = {p: ({n for n, _ in per_problem[p]} | set(references)) - pruned for p in problems}
    for p, name in current.items():
        wanted[p].add(name)  # timed whatever its resource report: it is the kernel the winner would replace
    # what a saved result depends on: the options, the arch, the candidates' texts, the device headers
    # those texts include (a render names a template, whose code is in the headers) and the GPUs that
    # time them (a tune resumed on another card measures again rather than mixing two cards' times)
    context = [options.to_dict(), arch, include_hash(), sorted(g.get("name", "") for g in gpu_info())]
    settings = {p: config_hash(context + [sorted((n, union[n]) for n in wanted[p])]) for p in problems}
    # which settings each problem is measured under: a result saved under others is measured again; beside
    # bench.json too, so that the folder as committed can seed another tune (seed_state)
    for folder in ([state] if state else []) + [out_dir]:
        write_json(folder / "settings.json", {p.key: settings[p] for p in problems})
    done = {p: r for p in problems if (r := _saved(state, p, settings[p])) is not None}
    todo = [p for p in problems if p not in done]
    # a chunk's results are saved when it ends, so one cut short by the caller's timeout is lost: the
    # budget counts the compiles above, and a chunk starts only if one as slow as the slowest yet fits
    results, slowest = None, 0.0
    step = chunk if state else max(1, len(todo))
    for i in range(0, len(todo), step):
        if max_seconds is not None and time.monotonic() - started + slowest > max_seconds:
            break
        part, chunk_start = todo[i:i + step], time.monotonic()
        results = run_bench(named, part, options, arch, progress, select=lambda problem, name: name in wanted[problem])
        slowest = max(slowest, time.monotonic() - chunk_start)
        for problem, pr in zip(part, results["problems"]):
            if results["gpu_run"]:  # a compile-only pass measures nothing worth keeping
                done[problem] = pr = dict(pr, measured_utc=results["env"].get("time_utc"))
                if state:
                    write_json(state / f"{problem.key}.json", {"settings": settings[problem], "result": pr})
            else:
                done.setdefault(problem, pr)
    if results is None:  # no chunk ran (all saved by earlier calls, or no time left): the saved results
        results = {"env": environment(options.timing_method), "options": options.to_dict(),
                   "arch": arch or detect_arch(), "gpu_run": bool(done), "candidates": infos}
    results["problems"] = [done[p] for p in problems if p in done]
    pending = [p.key for p in problems if p not in done]
    results["grid"] = "tune shortlist"
    results["pruned_by_resources"] = sorted(pruned)
    table = {"arch": results["arch"], "gpu_run": results["gpu_run"], "entries": {}, "fallback": FALLBACK_NAME,
             "env": results["env"], "pending": pending, "dispatch": DEFAULT_DISPATCH}
    used = set(references)
    for pr in results["problems"]:
        problem = Problem.from_dict(pr["problem"])
        ok = [(n, r) for n, r in pr["candidates"].items() if r.get("status") == "ok" and r.get("time_us")
              and not n.startswith(BESIDE)]
        if not ok:
            continue
        name, r = min(ok, key=lambda nr: nr[1]["time_us"])
        table["entries"][problem.key] = {"kernel": name, "time_us": r["time_us"], "tflops": r.get("tflops"),
                                         "speedup_vs_best": r.get("speedup_vs_best"),
                                         "speedup_vs_cublas": r.get("speedup_vs_cublas"),
                                         "best_baseline": pr.get("best_baseline"),
                                         "shape_class": problem.shape_class,
                                         "references": {n: r.get("speedup_vs_best") for n, r in ok if n in references},
                                         "timed": timed_ratios(pr["candidates"], r["time_us"])}
        if problem in current:
            old = pr["candidates"].get(current[problem], {})
            table["entries"][problem.key]["beside"] = {
                "kernel": current[problem][len(BESIDE):], "status": old.get("status"), "time_us": old.get("time_us"),
                "time_ratio": r["time_us"] / old["time_us"] if old.get("time_us") else None}
        used.add(name)
    for name in used:
        (out_dir / "kernels" / f"{name}.cu").write_text(union[name])
    (out_dir / "bench.json").write_text(json.dumps(results, separators=(",", ":"), default=str))  # MBs: compact
    (out_dir / "table.json").write_text(json.dumps(table, indent=1))
    (out_dir / "summary.md").write_text(markdown(results, "hgemm tune: seed families vs baselines"))
    if results["gpu_run"]:
        (out_dir / "goals.md").write_text(goals_markdown(results))
    if beside:
        (out_dir / "beside.md").write_text(beside_markdown(table))
    return table


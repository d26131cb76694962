"""The library's dispatch rules, on the CPU: exact, nearest tuned shape, fallback, layout filtering."""

import json

import pytest

from conftest import ROOT, write_library
from hgemm.candidate import parse_candidate
from hgemm.library import Library, tune_results
from hgemm.problem import Problem

NAIVE = (ROOT / "kernels_corpus/reference/naive.cu").read_text()
MMA = (ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()


@pytest.fixture
def library(tmp_path):
    return Library(write_library(tmp_path, {
        "generic": NAIVE, "big": MMA, "nn_only": MMA.replace("layouts: NN, TN", "layouts: NN")}, {
        Problem(4096, 4096, 4096).key: "big", Problem(16, 4096, 4096).key: "nn_only"}, "generic"))


def test_exact_hit(library):
    choice = library.lookup(Problem(4096, 4096, 4096))
    assert (choice.name, choice.how) == ("big", "exact")


def test_nearest_tuned_shape(library):
    choice = library.lookup(Problem(24, 4000, 4100))
    assert choice.name == "nn_only" and choice.how.startswith("nearest b1_m16_n4096_k4096")
    assert library.lookup(Problem(3000, 5000, 4096)).name == "big"


def test_layout_the_kernel_lacks_is_skipped(library):
    choice = library.lookup(Problem(16, 4096, 4096, 1, "TN"))
    assert choice.name != "nn_only"


def test_fallback_when_nothing_fits(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "generic.cu").write_text(NAIVE)
    (tmp_path / "table.json").write_text(json.dumps({"fallback": "generic", "entries": {}}))
    choice = Library(tmp_path).lookup(Problem(7, 9, 11, 2, "TN"))
    assert (choice.name, choice.how) == ("generic", "fallback")


def test_tma_kernels_are_not_dispatched_to_misaligned_shapes(tmp_path):
    from hgemm.library import tma_compatible

    tma = MMA.replace("layouts: NN, TN", "layouts: NN, TN\ntensor_map: A, box=(128, 64), swizzle=128\n"
                      "tensor_map: B, box=(64, 64), swizzle=128")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "generic.cu").write_text(NAIVE)
    (tmp_path / "kernels" / "tma.cu").write_text(tma)
    table = {"fallback": "generic", "entries": {Problem(4096, 4096, 4096).key: {"kernel": "tma"},
                                                Problem(4096, 4096, 4096, 1, "TN").key: {"kernel": "tma"}}}
    (tmp_path / "table.json").write_text(json.dumps(table))
    lib = Library(tmp_path)
    assert lib.lookup(Problem(4096, 4096, 4096)).name == "tma"
    assert lib.lookup(Problem(4096, 4095, 4096)).name == "generic"  # NN: B's rows are N long
    assert lib.lookup(Problem(4096, 4095, 4096, 1, "TN")).name == "tma"  # TN: B's rows are K long
    assert not tma_compatible(lib.candidate("tma"), Problem(8, 8, 4095))
    # staged maps describe the kernel's padded copies, whose pitch TMA always takes
    staged = parse_candidate(tma.replace("swizzle=128", "swizzle=128, staged=1"))
    assert tma_compatible(staged, Problem(8, 8, 4095)) and tma_compatible(staged, Problem(4095, 4095, 4095))


def test_a_tuned_shape_offers_its_winner_and_its_close_family_runners_up():
    from hgemm.library import RUNNER_UP_SLOWDOWN, RUNNER_UPS, offered

    ratios = {"mma_sync_64x64x32_w2x2_s4_g8_sk8_mp": 1.0, "mma_sync_64x64x32_w2x2_s3_g8_sk8_mp": 1.01,
              "reference_mma_pipelined": 1.02,            # no family's: the cost model cannot rank it
              "mma_sync_128x64x32_w2x2_s4_g8_sk8_mp": 1.05, "mma_sync_16x128x64_w1x4_s3_g8_sk4_mp": 1.08,
              "mma_sync_128x128x32_w2x4_s4_g8_sk1_mp": RUNNER_UP_SLOWDOWN + 0.01}
    assert RUNNER_UPS == 2
    assert offered("mma_sync_64x64x32_w2x2_s4_g8_sk8_mp", ratios) == [
        "mma_sync_64x64x32_w2x2_s4_g8_sk8_mp", "mma_sync_64x64x32_w2x2_s3_g8_sk8_mp",
        "mma_sync_128x64x32_w2x2_s4_g8_sk8_mp"]
    assert offered("a_model_kernel", {}) == ["a_model_kernel"]


def test_the_cost_dispatch_serves_a_runner_up_from_its_family_render(tmp_path):
    """On the committed tunes, some shape no tune saw goes to a kernel that won no tuned shape: a
    runner-up its library keeps no file of, launched as its family renders it."""
    from hgemm.cost import family_text
    from hgemm.library import merge_libraries
    from hgemm.problem import load_grid

    tunes = [ROOT / f for f in ("benchmarks/tune", "benchmarks/sample_tune", "benchmarks/skinny_mma/tune")]
    merge_libraries(tunes, tmp_path)
    lib = Library(tmp_path)
    winners = {e["kernel"] for e in lib.entries.values()}
    served = {lib.lookup(p).name for grid in ("heldout", "sample_heldout")
              for p in load_grid(ROOT / "configs/grids" / f"{grid}.yaml")}
    runners_up = served - winners
    assert runners_up
    for name in runners_up:
        assert not (tmp_path / "kernels" / f"{name}.cu").exists()
        assert lib.candidate(name).source == parse_candidate(family_text(name)).source


def test_tune_shortlist_prefers_one_copy_and_fuller_last_waves():
    """The tune times only the shortlisted variants (hgemm.tune.shortlist), so its estimate decides what
    the GPU ever sees. Where one operand alone is refused, copying only it must rank first; on the +1
    cubes 2049^3 and 4097^3, the 128x192 tile (fewer idle SMs in the last wave) must be among two timed."""
    from hgemm.problem import Problem
    from hgemm.tune import shortlist

    def wgmma_names(problem, tiles):
        return [name for name, _ in shortlist(problem, tiles) if name.startswith("wgmma_")]

    k_odd = wgmma_names(Problem(4096, 4096, 4095), 2)
    assert k_odd and all(n.endswith("_stagedA") for n in k_odd)
    n_odd = wgmma_names(Problem(4096, 4095, 4096), 2)
    assert n_odd and all(n.endswith("_stagedB") for n in n_odd)
    assert all(n.endswith("_staged") for n in wgmma_names(Problem(4095, 4095, 4095), 2))  # both refused
    for n in (2049, 4097):
        assert any(name.startswith("wgmma_128x192x64") for name in wgmma_names(Problem(n, n, n), 2)), n
    assert wgmma_names(Problem(4096, 4096, 4096), 2)[0].startswith("wgmma_128x256x64")  # aligned: unchanged
    # clusters (B multicast) timed where rows are off 128-byte lines, and not where they are not
    assert any("_cl2" in n for n in wgmma_names(Problem(4096, 4104, 4104), 2))
    assert "_cl2" in wgmma_names(Problem(4096, 4096, 4104, layout="TN"), 2)[0]
    assert not any("_cl2" in n for n in wgmma_names(Problem(4096, 4096, 4096), 2))
    # few tiles, a long K and a row pitch TMA refuses: a staged kernel that splits K (cluster split-K or
    # stream-K), timed beside the best unsplit staged one (the estimate cannot price copies against a
    # split mainloop); the split one copies only A
    def splits(name):
        return "_sk" in name or "_stk" in name

    few = wgmma_names(Problem(1024, 512, 12289), 1)
    assert any(splits(n) and n.endswith("_stagedA") for n in few), few
    assert any(not splits(n) and "_staged" in n for n in few), few
    assert not any("_staged" in n and splits(n) for n in wgmma_names(Problem(4096, 4096, 4095), 1))
    # two CTAs an SM ahead of the same tile at one where the tiles outnumber the SMs, absent where not
    many, few = wgmma_names(Problem(512, 512, 512, 16), 99), wgmma_names(Problem(512, 512, 512), 99)
    def tile(name):
        return name.split("_s")[0]

    twos = [n for n in many if "_x2" in n]
    assert twos and not any("_x2" in n for n in few)
    for name in twos:
        twin = next(n for n in many if "_x2" not in n and tile(n) == tile(name) and "_sk" not in n and "_stk" not in n)
        assert many.index(name) < many.index(twin), (name, twin)


def test_tune_shortlist_times_a_skinny_tile_at_both_depths_of_loads_in_flight():
    # the depth is not a tile: with one tile a family, 1 x 4096 x 4096 times the skinny tile at 8
    # loads in flight a thread and at 4, deepest first
    from hgemm.tune import shortlist

    skinny = [name for name, _ in shortlist(Problem(1, 4096, 4096), 1)
              if name.startswith("skinny_") and not name.startswith("skinny_mma_")]
    assert len(skinny) == 2 and skinny[0] == skinny[1] + "_u8", skinny


def test_tune_shortlist_times_every_narrow_variant_that_applies():
    # one tile a family for the others, but the narrow estimate does not rank its variants well enough
    # to time one: 768 x 7 x 5312 times all twelve, two column blocks of NB 4 among them
    from hgemm.tune import shortlist
    from kernels_corpus.families import narrow

    p = Problem(768, 7, 5312)
    timed = [name for name, _ in shortlist(p, 1) if name.startswith("narrow_")]
    assert sorted(timed) == sorted(narrow.name(v) for v in narrow.variants() if narrow.applicable(v, p))
    assert len(timed) == 12 and "narrow_nb4_l32_r1_w1" in timed


def test_tune_shortlist_times_every_short_k_variant_that_applies():
    # the short-K kernels have no estimate fitted to measurements: a K = 3 shape times all six of KMAX 4
    from hgemm.tune import shortlist
    from kernels_corpus.families import small_k

    p = Problem(4089, 9017, 3)
    timed = [name for name, _ in shortlist(p, 1) if name.startswith("small_k_")]
    assert sorted(timed) == sorted(small_k.name(v) for v in small_k.variants() if small_k.applicable(v, p))
    assert len(timed) == 6 and all(name.startswith("small_k_k4_") for name in timed)
    assert not [name for name, _ in shortlist(Problem(4089, 9017, 17), 1) if name.startswith("small_k_k")]


def test_tune_shortlist_times_every_skinny_tensor_core_variant_that_applies():
    # no estimate fitted to measurements yet: an M <= 16 shape times all 21 of one role, in clusters of
    # 1, 2 and 4, an N <= 16 shape the 21 swap variants, a shape with both small all 42, and where the
    # rows are not 16-byte aligned the role's 12 realigned `_pair` variants too; 17-64 rows in a role
    # (up to four 16-row chunks) the same; M and N past 64 or K <= 16 none
    from hgemm.tune import shortlist
    from kernels_corpus.families import skinny_mma

    def timed(p):
        return sorted(name for name, _ in shortlist(p, 1) if name.startswith("skinny_mma_"))

    def names(swap, loads, rg=1):
        return sorted(skinny_mma.name(v) for v in skinny_mma.variants()
                      if v["swap"] == swap and v.get("loads", "elem") == loads and skinny_mma.row_groups(v) == rg)

    plain, swap = names(False, "elem"), names(True, "elem")
    assert len(plain) == len(swap) == 21 and {n.split("_")[5] for n in plain} == {"s1", "s2", "s4"}
    assert len(names(False, "pair")) == len(names(True, "pair")) == 12
    for p in (Problem(16, 4096, 14336), Problem(1, 4096, 4096, layout="TN")):
        assert timed(p) == plain
    assert timed(Problem(4096, 8, 4096, layout="TN")) == swap
    assert timed(Problem(7033, 3, 3533)) == sorted(swap + names(True, "pair"))  # odd K: every row misaligned
    # odd N in NN: B's rows, which only the plain role reads as vectors, are misaligned
    assert timed(Problem(5, 13, 64)) == sorted(plain + names(False, "pair") + swap)
    # and the variants of 2 atoms a CTA past 16 rows, of 4 past 32
    assert timed(Problem(17, 4096, 4096)) == sorted(plain + names(False, "elem", 2))
    assert timed(Problem(64, 4096, 4096, layout="TN")) == sorted(plain + names(False, "elem", 2) + names(False, "elem", 4))
    assert timed(Problem(4096, 64, 4095)) == sorted(swap + names(True, "pair") + names(True, "elem", 2)
                                                    + names(True, "pair", 2))
    for p in (Problem(65, 4096, 4096), Problem(4096, 65, 4096), Problem(16, 4096, 16), Problem(4096, 16, 16)):
        assert not timed(p)


def test_tune_shortlist_times_every_tensor_core_short_k_variant_that_applies():
    # a K = 64 shape times all three of KMAX 64; K = 17 those of KMAX 32; K = 65 none
    from hgemm.tune import shortlist
    from kernels_corpus.families import small_k_mma

    for K, kmax in ((64, 64), (17, 32)):
        timed = [name for name, _ in shortlist(Problem(1419, 14848, K), 1) if name.startswith("small_k_mma_")]
        assert sorted(timed) == [f"small_k_mma_k{kmax}_u{u}" for u in (1, 2, 4)]
        assert sorted(timed) == sorted(small_k_mma.name(v) for v in small_k_mma.variants()
                                       if small_k_mma.applicable(v, Problem(1419, 14848, K)))
    assert not [name for name, _ in shortlist(Problem(1419, 14848, 65), 1) if name.startswith("small_k_mma_")]


def saved_result(problem: Problem, times_us: dict[str, float], baseline_us: float = 4.5) -> dict:
    """A problem's result as a GPU tune saves it: the candidates' and cuBLAS's times."""
    tflops = problem.flops / baseline_us / 1e6
    return {"problem": problem.to_dict(), "best_baseline": "cublas", "best_baseline_us": baseline_us,
            "baselines": {"cublas": {"time_us": baseline_us, "tflops": tflops, "verified": True}},
            "candidates": {name: {"status": "ok", "time_us": t, "tflops": problem.flops / t / 1e6,
                                  "speedup_vs_best": baseline_us / t, "speedup_vs_cublas": baseline_us / t}
                           for name, t in times_us.items()}}


def test_a_resumed_tune_keeps_saved_results_and_measures_the_rest(tmp_path):
    # On a CPU nothing is measured, so the second call shows the resume path with a result saved as a
    # GPU call saves it: the problem with a result under its current settings comes from the save,
    # the one saved under other settings is evaluated again.
    from hgemm.entry import EvalOptions
    from hgemm.tune import tune

    kept, stale = Problem(64, 64, 64), Problem(128, 64, 96)
    state = tmp_path / "progress"
    options = EvalOptions(reps=1, baselines=("cublas",))
    tune([kept, stale], tmp_path / "lib", options, tiles_per_family=1, arch="sm_90a", progress=False,
         state_dir=state)
    settings = json.loads((state / "settings.json").read_text())
    assert set(settings) == {kept.key, stale.key}
    measured = saved_result(kept, {"reference_mma_sync": 5.0})
    (state / f"{kept.key}.json").write_text(json.dumps({"settings": settings[kept.key], "result": measured}))
    (state / f"{stale.key}.json").write_text(json.dumps({"settings": "other", "result": measured}))
    table = tune([kept, stale], tmp_path / "lib", options, tiles_per_family=1, arch="sm_90a",
                 progress=False, state_dir=state)
    assert table["entries"][kept.key]["kernel"] == "reference_mma_sync" and stale.key not in table["entries"]
    bench = json.loads((tmp_path / "lib" / "bench.json").read_text())
    by_key = {Problem.from_dict(p["problem"]).key: p for p in bench["problems"]}
    assert by_key[kept.key] == measured
    assert all(r.get("status") != "ok" for r in by_key[stale.key]["candidates"].values())  # compiled only
    assert table["pending"] == []


@pytest.mark.parametrize("changed", ["edited_headers", "another_card"])
def test_a_saved_result_is_measured_again_after_a_header_edit_or_on_another_gpu(tmp_path, monkeypatch, changed):
    # A render names a template whose code lives in the device headers, so its text alone does not say
    # what was timed; and a resumed tune on another card would mix two cards' times in one table.
    import hgemm.tune as tune_module
    from hgemm.entry import EvalOptions

    problem, state = Problem(64, 64, 64), tmp_path / "progress"
    options = EvalOptions(reps=1, baselines=("cublas",))
    monkeypatch.setattr(tune_module, "gpu_info", lambda: [{"name": "NVIDIA H200"}])

    def run():
        return tune_module.tune([problem], tmp_path / "lib", options, tiles_per_family=1, arch="sm_90a",
                                progress=False, state_dir=state)

    run()
    settings = json.loads((state / "settings.json").read_text())[problem.key]
    saved = {"settings": settings, "result": saved_result(problem, {"reference_mma_sync": 5.0})}
    (state / f"{problem.key}.json").write_text(json.dumps(saved))
    assert run()["entries"][problem.key]["kernel"] == "reference_mma_sync"  # same settings: reused
    if changed == "edited_headers":
        monkeypatch.setattr(tune_module, "include_hash", lambda: "another header set")
    else:
        monkeypatch.setattr(tune_module, "gpu_info", lambda: [{"name": "NVIDIA H100 80GB HBM3"}])
    table = run()
    assert problem.key not in table["entries"]  # on a CPU the new settings' pass compiles and times nothing
    assert json.loads((state / "settings.json").read_text())[problem.key] != settings


def test_a_tune_out_of_time_starts_no_chunk_that_would_not_fit_and_says_what_is_left(tmp_path, monkeypatch):
    # A clock that the compiles move by 30 s and each chunk by 50: with 100 s, the first chunk ends at
    # 80 and a second would end at 130, so it is not started; with 20 s the compiles alone use it up.
    import types

    import hgemm.tune as tune_module
    from hgemm.entry import EvalOptions

    clock = {"now": 0.0}
    compile_all, run_bench = tune_module.compile_all, tune_module.run_bench

    def compiles(*args, **kwargs):
        clock["now"] += 30
        return compile_all(*args, **kwargs)

    def chunk(*args, **kwargs):
        clock["now"] += 50
        return run_bench(*args, **kwargs)

    monkeypatch.setattr(tune_module, "time", types.SimpleNamespace(monotonic=lambda: clock["now"]))
    monkeypatch.setattr(tune_module, "compile_all", compiles)
    monkeypatch.setattr(tune_module, "run_bench", chunk)
    problems = [Problem(64, 64, 64), Problem(128, 64, 96), Problem(64, 128, 64)]
    options = EvalOptions(reps=1, baselines=("cublas",))
    for budget, pending in ((100, problems[1:]), (20, problems)):
        clock["now"] = 0.0
        table = tune_module.tune(problems, tmp_path / f"lib{budget}", options, tiles_per_family=1, arch="sm_90a",
                                 progress=False, state_dir=tmp_path / f"progress{budget}", max_seconds=budget, chunk=1)
        assert table["pending"] == [p.key for p in pending]


def test_a_tune_beside_a_library_times_its_kernel_for_each_shape_and_never_picks_it(library, tmp_path):
    from hgemm.entry import EvalOptions
    from hgemm.tune import tune

    problem, state = Problem(4096, 4096, 4096), tmp_path / "progress"
    options = EvalOptions(reps=1, baselines=("cublas",))
    tune([problem], tmp_path / "lib", options, tiles_per_family=1, arch="sm_90a", progress=False,
         beside=library, state_dir=state)
    bench = json.loads((tmp_path / "lib" / "bench.json").read_text())
    # on a CPU the candidates are compiled, not timed; the library's kernel for the shape is among them
    assert "beside:big" in bench["problems"][0]["candidates"]
    assert bench["candidates"]["beside:big"]["status"] == "compiled"
    # with a result as a GPU call saves it, the faster of the two wins and the entry compares them
    measured = saved_result(problem, {"reference_mma_sync": 200.0, "beside:big": 100.0})
    settings = json.loads((state / "settings.json").read_text())[problem.key]
    (state / f"{problem.key}.json").write_text(json.dumps({"settings": settings, "result": measured}))
    table = tune([problem], tmp_path / "lib", options, tiles_per_family=1, arch="sm_90a", progress=False,
                 beside=library, state_dir=state)
    entry = table["entries"][problem.key]
    assert entry["kernel"] == "reference_mma_sync"  # the compared kernel is never chosen
    assert entry["beside"] == {"kernel": "big", "status": "ok", "time_us": 100.0, "time_ratio": 2.0}
    beside = (tmp_path / "lib" / "beside.md").read_text()
    assert "| big | 100.0 | reference_mma_sync | 200.0 | 2.000 |" in beside
    assert "new / current geomean 2.0000, worst 2.0000, 0 at most 2% slower, 0 more than 2% faster." in beside


def test_a_re_tune_counts_the_shapes_its_winners_take_more_than_2pct_off():
    from hgemm.summary import beside_markdown

    def entry(ratio):
        return {"kernel": "new", "time_us": 10.0 * ratio,
                "beside": {"kernel": "old", "status": "ok", "time_us": 10.0, "time_ratio": ratio}}

    table = {"entries": {f"b1_m{m}_n64_k64_NN": entry(r) for m, r in ((64, 0.5), (128, 0.97), (192, 1.0), (256, 1.1))}}
    # 0.97 is 3% less time, under 1 / 1.02; 1.0 is a tie; 1.1 is more than 2% slower
    assert "4 shapes timed beside the current kernel: new / current geomean" in beside_markdown(table)
    assert "3 at most 2% slower, 2 more than 2% faster." in beside_markdown(table)


def test_the_fallback_is_a_family_kernel_for_every_shape_and_layout_timed_on_every_shape(tmp_path):
    from hgemm.entry import EvalOptions
    from hgemm.tune import FALLBACK_NAME, tune

    table = tune([Problem(64, 64, 64)], tmp_path / "lib", EvalOptions(reps=1, baselines=("cublas",)),
                 tiles_per_family=1, arch="sm_90a", progress=False)
    assert table["fallback"] == FALLBACK_NAME
    bench = json.loads((tmp_path / "lib" / "bench.json").read_text())
    assert bench["candidates"][FALLBACK_NAME]["status"] == "compiled"
    assert FALLBACK_NAME in bench["problems"][0]["candidates"]
    fallback = Library(tmp_path / "lib").candidate(FALLBACK_NAME)
    assert "#include <hgemm/mma_sync_gemm.cuh>" in fallback.source and set(fallback.spec.layouts) == {"NN", "TN"}
    for shape in [(1, 1, 1, 1), (7, 4099, 33, 5), (16384, 3, 16384, 1)]:  # any shape, no workspace
        dims = fallback.spec.launch_dims(Problem(*shape).variables() | {"num_sms": 132})
        assert dims[3] == 0


def _tuned(folder, entries: dict[str, tuple[str, float]], kernels: dict[str, str], fallback: str = "generic"):
    """A tune folder whose entries carry the measured speedups a merge compares."""
    write_library(folder, kernels | {fallback: NAIVE}, {k: name for k, (name, _) in entries.items()}, fallback)
    table = json.loads((folder / "table.json").read_text())
    for key, (_, speedup) in entries.items():
        table["entries"][key]["speedup_vs_best"] = speedup
    (folder / "table.json").write_text(json.dumps(table))
    return folder


def test_a_merge_keeps_every_shape_and_the_faster_entry_where_both_tuned_one(tmp_path):
    from hgemm.library import merge_libraries

    both, only_a, only_b = Problem(4096, 4096, 4096).key, Problem(64, 64, 64).key, Problem(33, 4099, 17, 1, "TN").key
    a = _tuned(tmp_path / "a", {both: ("big", 0.9), only_a: ("big", 0.5)}, {"big": MMA})
    b = _tuned(tmp_path / "b", {both: ("mma2", 1.1), only_b: ("mma2", 0.7)}, {"mma2": MMA.replace("mma", "mma2", 0)},
               fallback="other")
    table = merge_libraries([a, b], tmp_path / "m")
    assert {k: (e["kernel"], e["from"]) for k, e in table["entries"].items()} == {
        both: ("mma2", str(b)), only_a: ("big", str(a)), only_b: ("mma2", str(b))}
    assert table["fallback"] == "generic"  # the first folder's
    lib = Library(tmp_path / "m")
    assert lib.lookup(Problem(4096, 4096, 4096)).name == "mma2" and lib.candidate(lib.fallback).source == NAIVE
    assert sorted(p.name for p in (tmp_path / "m" / "kernels").iterdir()) == ["big.cu", "generic.cu", "mma2.cu"]
    # a second merge into the same folder, of b first: b's fallback ("other") and only what it names
    table = merge_libraries([b, a], tmp_path / "m")
    assert table["fallback"] == "other"
    assert sorted(p.name for p in (tmp_path / "m" / "kernels").iterdir()) == ["big.cu", "mma2.cu", "other.cu"]


def test_a_merge_refuses_two_different_kernels_under_one_name(tmp_path):
    from hgemm.library import merge_libraries

    a = _tuned(tmp_path / "a", {Problem(64, 64, 64).key: ("k", 1.0)}, {"k": MMA})
    b = _tuned(tmp_path / "b", {Problem(128, 64, 64).key: ("k", 1.0)}, {"k": MMA + "\n// another\n"})
    with pytest.raises(ValueError, match="different kernels named k"):
        merge_libraries([a, b], tmp_path / "m")


def test_libraries_benched_together_are_named_by_folder_and_run_their_own_choice(tmp_path):
    from hgemm.cli import library_candidates

    big, small = Problem(4096, 4096, 4096), Problem(64, 64, 64)
    a = _tuned(tmp_path / "a", {big.key: ("big", 1.0)}, {"big": MMA})
    b = _tuned(tmp_path / "b", {big.key: ("nn_only", 1.0), small.key: ("big", 1.0)},
               {"big": MMA, "nn_only": MMA.replace("layouts: NN, TN", "layouts: NN")})
    named, select = library_candidates([str(a), str(b)], [big, small])
    assert [n for n, _ in named] == ["a:big", "b:big", "b:nn_only"]
    assert select(big, "a:big") and select(big, "b:nn_only") and not select(big, "b:big")
    assert select(small, "a:big") and select(small, "b:big") and not select(small, "b:nn_only")
    named, _ = library_candidates([str(a)], [big])
    assert [n for n, _ in named] == ["library:big"]  # one library: the usual name


def test_a_tune_resumes_from_a_committed_folder_where_the_settings_still_match(tmp_path):
    from hgemm.entry import EvalOptions
    from hgemm.tune import seed_state, tune

    kept, other = Problem(64, 64, 64), Problem(128, 64, 96)
    options = EvalOptions(reps=1, baselines=("cublas",))
    first = tmp_path / "first"
    tune([kept, other], first, options, tiles_per_family=1, arch="sm_90a", progress=False, state_dir=first / "progress")
    # the folder as committed: settings.json beside a bench.json holding measured results
    committed = tmp_path / "committed"
    committed.mkdir()
    settings = json.loads((first / "progress" / "settings.json").read_text())
    settings[other.key] = "measured under other candidates"
    (committed / "settings.json").write_text(json.dumps(settings))
    (committed / "bench.json").write_text(json.dumps({"problems": [
        saved_result(kept, {"reference_mma_sync": 5.0}), saved_result(other, {"reference_mma_sync": 6.0})]}))
    state = tmp_path / "again" / "progress"
    assert seed_state(state, committed) == 2
    assert seed_state(state, committed) == 0  # already there: left alone
    table = tune([kept, other], tmp_path / "again", options, tiles_per_family=1, arch="sm_90a", progress=False,
                 state_dir=state)
    assert set(table["entries"]) == {kept.key}  # the other was measured under other settings: to measure again


def test_the_tune_stage_reuses_libraries_tuned_on_its_grid_and_refuses_one_of_another(tmp_path):
    from stages import tune as tune_stage

    def stage(out, *sets):
        return tune_stage.main(["--config", str(ROOT / "configs/default.yaml"), "--out", str(out),
                                *[a for kv in sets for a in ("--set", kv)]])

    tuned, sample = ROOT / "benchmarks/tune", ROOT / "benchmarks/sample_tune"
    assert stage(tmp_path / "one", f"reuse=[{tuned}]") == 0
    source = json.loads((tuned / "table.json").read_text())
    copied = json.loads((tmp_path / "one/table.json").read_text())
    # the source's table, with what its tune timed on each shape for the cost and measured dispatches
    timed = {key: entry.pop("timed") for key, entry in copied["entries"].items()}
    # with default.yaml's first-call search width, which hgemm.matmul reads from the table
    assert copied == dict(source, dispatch="cost", autotune=8)
    assert all(abs(timed[key][entry["kernel"]] - 1) < 0.01 for key, entry in source["entries"].items())
    lib = Library(tmp_path / "one")
    for key, entry in source["entries"].items():
        assert lib.lookup(Problem.from_key(key)).name == entry["kernel"]
    assert json.loads((tmp_path / "one/bench.json").read_text())["gpu_run"] is True
    metrics = json.loads((tmp_path / "one/metrics.json").read_text())
    assert metrics["tuned_shapes"] == len(source["entries"]) and metrics["reused_from"] == [str(tuned)]

    # both tunes: one library with every shape either tuned, and one results file with all their shapes
    assert stage(tmp_path / "both", f"reuse=[{tuned}, {sample}]") == 0
    both = json.loads((tmp_path / "both/table.json").read_text())
    other = json.loads((sample / "table.json").read_text())
    assert set(both["entries"]) == set(source["entries"]) | set(other["entries"])
    measured = json.loads((tmp_path / "both/bench.json").read_text())["problems"]
    assert len(measured) == len(tune_results(tuned)["problems"]) + len(tune_results(sample)["problems"])
    assert all(Library(tmp_path / "both").candidate(e["kernel"]) for e in both["entries"].values())
    assert stage(tmp_path / "both", f"reuse=[{tuned}, {sample}]", "autotune=0") == 0
    assert Library(tmp_path / "both").autotune == 0

    with pytest.raises(SystemExit) as e:  # the held-out grid: none of its shapes is in either table
        stage(tmp_path / "other", f"reuse=[{tuned}]", "grid=configs/grids/heldout.yaml")
    assert "tuned on another grid: 48 of 48 shapes not in its table" in str(e.value.code)


def _timed_library(folder, dispatch: str | None, timed: bool = True):
    """Three tuned NN shapes near 1000 x 1000 x 1000: the nearest one won by `near`, which its
    neighbours measured 1.6x slower than `steady`, the winner of the other two and 1.05x on the first."""
    shapes = {Problem(1024, 1024, 1024).key: ("near", {"near": 1.0, "steady": 1.05}),
              Problem(2048, 1024, 1024).key: ("steady", {"steady": 1.0, "near": 1.6}),
              Problem(1024, 2048, 1024).key: ("steady", {"steady": 1.0, "near": 1.6})}
    write_library(folder, {"near": MMA, "steady": MMA, "generic": NAIVE},
                  {k: name for k, (name, _) in shapes.items()}, "generic")
    table = json.loads((folder / "table.json").read_text())
    for key, (_, ratios) in shapes.items():
        table["entries"][key]["timed"] = ratios if timed else {}
    if dispatch:
        table["dispatch"] = dispatch
    (folder / "table.json").write_text(json.dumps(table))
    return Library(folder)


def test_the_measured_dispatch_takes_the_kernel_fastest_over_the_nearest_tuned_shapes(tmp_path):
    unseen = Problem(1000, 1000, 1000)
    choice = _timed_library(tmp_path / "m", "measured").lookup(unseen)
    assert (choice.name, choice.how) == ("steady", "measured b1_m1024_n1024_k1024_NN")
    # the nearest shape's kernel under the nearest rule, a table without the key, or no timings at all
    assert _timed_library(tmp_path / "n", "nearest").lookup(unseen).name == "near"
    assert _timed_library(tmp_path / "d", None).lookup(unseen).name == "near"
    assert _timed_library(tmp_path / "u", "measured", timed=False).lookup(unseen).name == "near"
    assert _timed_library(tmp_path / "e", "measured").lookup(Problem(1024, 1024, 1024)).how == "exact"
    with pytest.raises(ValueError, match="dispatch 'fastest' is not one of cost, measured, nearest"):
        _timed_library(tmp_path / "x", "fastest")


def test_a_merge_gives_each_entry_what_its_tune_timed_and_dispatches_by_it(tmp_path):
    import gzip

    from hgemm.library import merge_libraries

    key = Problem(64, 64, 64).key
    a = _tuned(tmp_path / "a", {key: ("big", 0.9)}, {"big": MMA})
    table = json.loads((a / "table.json").read_text())
    table["entries"][key]["time_us"] = 10.0
    (a / "table.json").write_text(json.dumps(table))
    bench = {"problems": [{"problem": Problem(64, 64, 64).to_dict(), "candidates": {
        "big": {"status": "ok", "time_us": 10.0}, "beside:old": {"status": "ok", "time_us": 15.0},
        "broken": {"status": "wrong", "time_us": 1.0}}}]}
    (a / "bench.json.gz").write_bytes(gzip.compress(json.dumps(bench).encode()))
    table = merge_libraries([a], tmp_path / "m")
    assert table["entries"][key]["timed"] == {"big": 1.0, "old": 1.5}   # verified kernels only, beside by name
    assert table["dispatch"] == "cost" and Library(tmp_path / "m").dispatch == "cost"
    assert merge_libraries([a], tmp_path / "n", dispatch="nearest")["dispatch"] == "nearest"


def _measured_library(folder, entries: dict[str, tuple[str, dict]], kernels: dict[str, str]) -> Library:
    """A `measured` library of these entries (problem key -> (winner, what its tune timed)) and kernels,
    with the naive kernel as its fallback."""
    write_library(folder, kernels | {"generic": NAIVE}, {k: name for k, (name, _) in entries.items()}, "generic")
    table = json.loads((folder / "table.json").read_text())
    for key, (_, ratios) in entries.items():
        table["entries"][key]["timed"] = ratios
    table["dispatch"] = "measured"
    (folder / "table.json").write_text(json.dumps(table))
    return Library(folder)


def test_the_measured_dispatch_picks_only_kernels_its_neighbours_timed(tmp_path):
    """A kernel no nearby tune timed is unknown there, not 1.3x slower: it must not win over kernels the
    neighbours measured (here two that are 2x off at each other's shapes)."""
    near = [Problem(1024 + 64 * i, 1024, 1024) for i in range(8)]
    entries = {p.key: ("a" if i % 2 else "b", {"a": 1.0, "b": 2.0} if i % 2 else {"b": 1.0, "a": 2.0})
               for i, p in enumerate(near)}
    entries[Problem(16, 16384, 64).key] = ("far", {"far": 1.0})   # not among the 8 nearest
    lib = _measured_library(tmp_path, entries, {"a": MMA, "b": MMA, "far": MMA})
    assert lib.lookup(Problem(1200, 1024, 1024)).name in ("a", "b")


def test_the_alignment_distance_tells_apart_which_operand_tma_refuses(tmp_path):
    """An unseen NN shape whose A rows TMA refuses (K odd) takes the kernel that wins where A's rows are
    refused, not the one of a nearer shape whose B rows are (N odd): a staged copy of the other operand."""
    from hgemm.library import ALIGN_PENALTY, aligned_distance, log_distance

    unseen = Problem(2000, 2048, 1001)
    a_refused, b_refused = Problem(1024, 2048, 999), Problem(2048, 2047, 1024)
    assert log_distance(unseen, b_refused) < log_distance(unseen, a_refused)
    assert aligned_distance(unseen, a_refused) == pytest.approx(log_distance(unseen, a_refused))
    assert aligned_distance(unseen, b_refused) == pytest.approx(log_distance(unseen, b_refused) + 2 * ALIGN_PENALTY)
    entries = {a_refused.key: ("staged_a", {"staged_a": 1.0, "staged_b": 1.5}),
               b_refused.key: ("staged_b", {"staged_b": 1.0, "staged_a": 1.5})}
    lib = _measured_library(tmp_path, entries, {"staged_a": MMA, "staged_b": MMA})
    assert lib.lookup(unseen).name == "staged_a"
    assert lib.lookup(Problem(2000, 2047, 1024)).name == "staged_b"


def test_a_pinned_library_keeps_its_choices_and_serves_them_only_on_their_shapes(tmp_path, capsys):
    """hgemm pin: each grid shape's choice as the library makes it, as an exact entry; a pinned entry is
    no neighbour for other shapes (here: an unseen TN shape near a pinned one still falls back)."""
    from hgemm.cli import main
    from hgemm.library import pin_library

    lib = _timed_library(tmp_path / "m", "measured")
    unseen, tn = Problem(1000, 1000, 1000), Problem(7, 9, 11, 2, "TN")
    pinned = pin_library(tmp_path / "m", [unseen, tn], tmp_path / "p")
    assert {k: (e["kernel"], e["how"]) for k, e in pinned["entries"].items() if e.get("source") == "pinned"} == {
        unseen.key: (lib.lookup(unseen).name, "measured b1_m1024_n1024_k1024_NN"), tn.key: ("generic", "fallback")}
    again = Library(tmp_path / "p")
    assert (again.lookup(unseen).name, again.lookup(unseen).how) == ("steady", "exact")
    assert again.lookup(Problem(8, 9, 11, 2, "TN")).how == "fallback"
    assert again.lookup(Problem(1100, 1000, 1000)).name == lib.lookup(Problem(1100, 1000, 1000)).name
    assert sorted(p.name for p in (tmp_path / "p" / "kernels").iterdir()) == ["generic.cu", "near.cu", "steady.cu"]

    grid = tmp_path / "grid.yaml"
    grid.write_text("groups:\n- class: general\n  layouts: [NN, TN]\n  shapes:\n  - [1000, 1000, 1000, 1]\n")
    assert main(["pin", str(tmp_path / "m"), "--grid", str(grid), "--out", str(tmp_path / "q")]) == 0
    assert "2 shapes pinned (1 fallback, 1 measured)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["pin", str(tmp_path / "none"), "--grid", str(grid), "--out", str(tmp_path / "r")])
    assert str(e.value.code) == f"hgemm: {tmp_path / 'none'}: not a tuned library (no table.json)"


def test_refresh_gives_a_stored_family_kernel_its_current_launch_spec_and_leaves_other_code_alone(tmp_path, capsys):
    from hgemm.cli import main
    from hgemm.cost import family_text

    split = "mma_sync_16x128x64_w1x4_s3_g8_sk4_mp"
    render = family_text(split)
    assert "workspace_zero: kept" in render
    stale = render.replace("workspace_zero: kept\n", "")   # as a tune stored it before its family kept the workspace
    edited = stale.replace("__launch_bounds__(128, 3)", "__launch_bounds__(128, 2)")  # other code: not the family's
    folder = write_library(tmp_path, {split: stale, "other": edited, "generic": NAIVE},
                           {Problem(128, 81, 1745).key: split, Problem(64, 64, 64).key: "other"}, "generic")
    assert main(["refresh", str(folder)]) == 0
    assert "1 kernel texts" in capsys.readouterr().out
    assert (folder / "kernels" / f"{split}.cu").read_text() == render
    assert (folder / "kernels" / "other.cu").read_text() == edited
    assert (folder / "kernels" / "generic.cu").read_text() == NAIVE
    assert Library(folder).lookup(Problem(128, 81, 1745)).candidate.spec.workspace_zero == "kept"


def test_every_committed_library_launches_its_family_kernels_as_the_family_does():
    """A stored kernel whose family now keeps its workspace zero would otherwise fill it before every
    launch (1.8-3.4 µs on the split and staged kernels, benchmarks/workspace_fill/), and two libraries
    holding it both ways refuse to merge: `hgemm refresh` brings them in line."""
    from hgemm.library import stale_launch_specs

    folders = sorted({path.parent for path in ROOT.glob("benchmarks/**/table.json")})
    assert len(folders) >= 10
    stale = {str(folder.relative_to(ROOT)): list(stale_launch_specs(folder)) for folder in folders}
    assert {folder: names for folder, names in stale.items() if names} == {}


def test_tune_shortlist_times_two_consumer_wgmma_tiles_with_both_parked_and_bulk_copy_epilogues():
    """The estimate ties a two-consumer tile's bulk-copy epilogue with its parked one, so the shortlist
    counts the two as one tile and times both at each of its deepest rings; a one-consumer tile has no
    bulk form, and the bulk form never takes another tile's place."""
    from hgemm.cost import kernel_params
    from hgemm.problem import Problem
    from hgemm.tune import shortlist

    for p in (Problem(2048, 2048, 2048), Problem(4096, 4096, 4096, 1, "TN"), Problem(1024, 1024, 1024, 4)):
        for tiles in (1, 2):
            params = [kernel_params(name) for name, _ in shortlist(p, tiles) if name.startswith("wgmma_")]
            whole = [q for q in params if not q.get("streamk")]
            shapes = {(q["bm"], q["bn"], q["consumers"], q.get("loader"), q.get("ctas_per_sm")) for q in whole}
            assert len(shapes) == tiles, whole
            bulk = [q for q in whole if q.get("epilogue") == "bulk"]
            parked = [q for q in whole if q.get("epilogue") == "smem" and q["consumers"] == 2]
            assert bulk and {(q["bm"], q["bn"], q["stages"]) for q in bulk} == {(q["bm"], q["bn"], q["stages"]) for q in parked}
            assert all(q["consumers"] == 2 for q in bulk)


def test_tune_shortlist_times_its_first_wgmma_tiles_whole_and_stream_k():
    """Where the last round of tiles leaves two or more SMs a tile idle, or the tiles are few, the tune
    times its first wgmma tile in both forms, whole-tile and stream-K (hgemm.tune.streamk_siblings), so
    that it holds stream-K times beside their twins' for its winners and the cost model; neither form is
    added where stream-K does not apply."""
    from hgemm.cost import kernel_params
    from hgemm.problem import Problem
    from hgemm.tune import STREAMK_SIBLINGS, shortlist
    from kernels_corpus.families import wgmma

    def tile(params):
        return params["bm"], params["bn"], params["consumers"], params.get("loader")

    for p in (Problem(2455, 3840, 7680), Problem(128, 512, 7616), Problem(449, 995, 15104, 1, "TN")):
        for tiles in (1, 2):
            alone = [name for name, _ in shortlist(p, tiles) if name.startswith("wgmma_")]
            params = [kernel_params(name) for name in alone]
            assert all(params), alone  # every kernel timed is one of the family's variants
            streamk = [q for q in params if q.get("streamk")]
            assert streamk and all(wgmma.applicable(q, p) for q in streamk), alone
            first = [q for q in params if tile(q) == tile(params[0])]   # the first tile, in both forms
            assert any(q.get("streamk") for q in first) and not all(q.get("streamk") for q in first), alone
            assert len(alone) <= 4 * tiles + STREAMK_SIBLINGS   # two rings, two epilogues on two consumers
    for p in (Problem(4096, 4096, 4096), Problem(4096, 4096, 448)):   # a whole last round; 7 k tiles
        assert not any("_stk" in name for name, _ in shortlist(p, 2))

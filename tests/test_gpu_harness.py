"""GPU tests of the harness: honest kernels pass everywhere, every adversarial kernel is caught, and the
timer measures kernels, not Python. Run on the GPU machine: pytest -m gpu."""

from __future__ import annotations

import pytest

from conftest import ROOT
from hgemm.entry import EvalOptions
from hgemm.problem import Problem, load_grid

pytestmark = pytest.mark.gpu

HONEST = ("naive", "smem_tiled", "mma_sync", "mma_pipelined")
# Each adversarial kernel and the classes that count as caught.
# Kernels that skip work on state an earlier timed launch left behind: only caught once timed launches
# reuse buffers (test_reused_outputs_are_what_the_guards_close).
STATEFUL = ("stale_output", "input_marker", "slow_when_fresh")
ADVERSARIAL = {
    "wrong_result": {"wrong"},
    "all_zeros": {"wrong"},
    "partial_write": {"wrong"},
    "oob_write": {"wrong"},
    "modify_input": {"wrong"},
    # module-scope state (a done flag, a pointer memo, a result stash): refused before it runs
    "cached_result": {"compile_error"},
    "pointer_memo": {"compile_error"},
    "result_stash": {"compile_error"},
    "side_stream": {"compile_error"},
    "hang": {"timeout"},
    "illegal_address": {"crash"},
    "fp16_accum": {"wrong"},
    "uninit_smem": {"wrong"},
    "lying_grid": {"wrong"},
    "lying_smem": {"crash", "launch_error", "wrong"},
    "wrong_signature": {"launch_error"},
    "dirty_workspace": {"wrong"},  # a workspace it promised to leave zero, left written
}


def run(kernel_paths, problems, options, **pool_kw):
    from hgemm.pool import EvaluationPool, compile_all

    named = [(p.stem, p.read_text()) for p in kernel_paths]
    compiled = compile_all(named, layouts=tuple(sorted({p.layout for p in problems})))
    status = {name: info for (name, _), (_, info) in zip(named, compiled)}
    entries = [e for e, _ in compiled if e is not None]
    with EvaluationPool(options, **pool_kw) as pool:
        results = pool.run([(p, [e for e in entries if p.layout in e.cubins]) for p in problems])
        restarts = pool.restarts
    return status, results, restarts


def test_honest_kernels_pass_edge_shapes():
    problems = load_grid(ROOT / "configs/grids/smoke.yaml")
    problems += [Problem(1, 1, 5000), Problem(130, 1, 70, 5, "TN"), Problem(2, 3, 4, 7)]
    paths = [ROOT / f"kernels_corpus/reference/{k}.cu" for k in HONEST]
    status, results, _ = run(paths, problems, EvalOptions(timing=False))
    assert all(s["status"] == "compiled" for s in status.values()), status
    for pr in results:
        for name in HONEST:
            r = pr["candidates"][name]
            assert r["status"] == "ok", (pr["problem"], name, r.get("error"))


def test_a_timing_longer_than_the_deadline_that_makes_progress_is_not_a_timeout():
    # the watchdog's timing deadline is for silence: each batch says "alive", so 800 repetitions of two
    # kernels and the baselines at 2048^3 (more than 5 s of timed batches alone) finish under a 5-s
    # deadline (which also covers the setup before the first batch: input sets, baselines)
    problems = [Problem(2048, 2048, 2048)]
    paths = [ROOT / f"kernels_corpus/reference/{k}.cu" for k in ("mma_sync", "mma_pipelined")]
    _, results, restarts = run(paths, problems, EvalOptions(reps=800), timing_timeout_s=5.0)
    cands = results[0]["candidates"]
    assert restarts == 0
    assert all(r["status"] == "ok" for r in cands.values()), cands
    timings = [r["timing"] for r in cands.values()] + [b["timing"] for b in results[0]["baselines"].values()]
    assert sum(t["reps"] * t["launches_per_rep"] * t["median_us"] for t in timings) / 1e6 > 5.0


def test_every_adversarial_kernel_is_caught():
    problems = [Problem(256, 256, 4096, 2)]
    paths = sorted((ROOT / "tests/adversarial").glob("*.cu"))
    assert {p.stem for p in paths} == set(ADVERSARIAL) | set(STATEFUL)
    paths = [p for p in paths if p.stem in ADVERSARIAL]
    status, results, restarts = run(paths, problems, EvalOptions(reps=3, baselines=("cublas",)),
                                    verify_timeout_s=20)
    caught = {}
    for name in ADVERSARIAL:
        r = status[name] if status[name]["status"] != "compiled" else results[0]["candidates"][name]
        caught[name] = r["status"]
    missed = {n: s for n, s in caught.items() if s not in ADVERSARIAL[n]}
    assert not missed, f"adversarial kernels not caught as expected: {missed}; all: {caught}"
    assert restarts >= 2  # the hang and the illegal address each cost a worker


def test_honest_kernel_survives_next_to_a_crash():
    """A crashing candidate in the same job must not take the honest one's result with it."""
    paths = [ROOT / "tests/adversarial/illegal_address.cu", ROOT / "kernels_corpus/reference/mma_sync.cu"]
    _, results, _ = run(paths, [Problem(512, 512, 512)], EvalOptions(reps=3, baselines=("cublas",)))
    cands = results[0]["candidates"]
    assert cands["illegal_address"]["status"] == "crash"
    assert cands["mma_sync"]["status"] == "ok" and cands["mma_sync"]["time_us"] > 0


def test_baselines_verified_and_faster_than_naive():
    problems = [Problem(4095, 4097, 1023), Problem(128, 128, 128, 64), Problem(16, 4096, 4096, 1, "TN")]
    _, results, _ = run([ROOT / "kernels_corpus/reference/naive.cu"], problems, EvalOptions(reps=5))
    for pr in results:
        assert pr["baselines"], pr
        for name, b in pr["baselines"].items():
            assert b["verified"], (name, pr["problem"])
            assert b["timing"]["median_us"] > 0
        assert pr["best_baseline"] is not None
        naive = pr["candidates"]["naive"]
        assert naive["status"] == "ok" and naive["speedup_vs_best"] < 1.0
    assert "pad8_cublas" in results[0]["baselines"]  # misaligned shape gets the padded baseline


# -- timing, in this process ----------------------------------------------------------------------

SPIN_KERNEL = r"""
#include <cuda_fp16.h>
/*@launch
entry: spin_for
block: 32
grid: 1
@*/
extern "C" __global__ void spin_for(const __half* A, const __half* B, __half* C, int M, int N, int K, int batch,
                                    void* workspace) {
  // M microseconds of device time; M = 0: an empty kernel
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < 1000ull * M);
}
"""


@pytest.fixture(scope="module")
def evaluator():
    from hgemm.evaluate import GemmEvaluator

    return GemmEvaluator(EvalOptions())


def _spin_launcher(evaluator, micros: int):
    """A launcher of SPIN_KERNEL running `micros` µs (0: an empty kernel), bypassing verification."""
    import torch

    from hgemm.candidate import parse_candidate
    from hgemm.compile import compile_candidate
    from hgemm.params import Param, pack_params

    res = compile_candidate(parse_candidate(SPIN_KERNEL), "NN")
    assert res.ok, res.error
    kernel = evaluator._kernel(res.cubin_path, "spin_for")
    x = torch.empty(16, dtype=torch.float16, device="cuda")
    buf = pack_params([Param("P", x.data_ptr())] * 3 + [Param("i", micros)] + [Param("i", 1)] * 3 + [Param("P", 0)])
    return lambda i: kernel.launch((1, 1, 1), (32, 1, 1), buf, 0)


def test_empty_kernel_measures_a_few_microseconds(evaluator):
    from hgemm.timing import Timer

    timer = Timer(evaluator.util, n_sets=1, reps=10)
    stats = timer.time_interleaved({"empty": _spin_launcher(evaluator, 0)})["empty"]
    # back-to-back launches of an empty kernel cost the GPU ~1-3 µs each; Python dispatch (~5-20 µs) must not show
    assert stats.median_us < 4.0, stats


@pytest.mark.parametrize("micros", [20, 200])
def test_known_duration_is_measured(evaluator, micros):
    from hgemm.timing import Timer

    timer = Timer(evaluator.util, n_sets=1, reps=10)
    stats = timer.time_interleaved({"spin": _spin_launcher(evaluator, micros)})["spin"]
    assert micros <= stats.median_us <= micros * 1.05 + 3.0, stats
    assert stats.spread < 0.1, stats


def test_a_contender_the_host_cannot_run_ahead_of_is_timed_in_seconds_and_marked(evaluator):
    # A call that waits for the GPU starves every batch behind its spin (the host enqueues nothing
    # ahead): longer spins cannot help, so the timer halves the batch and marks the figure host-bound
    # instead of doubling the spin for minutes.
    import time

    from hgemm.runtime import synchronize
    from hgemm.timing import Timer

    launch = _spin_launcher(evaluator, 0)

    def waits(i):
        launch(i)
        synchronize()

    timer = Timer(evaluator.util, n_sets=1, reps=10)
    t0 = time.monotonic()
    stats = timer.time_interleaved({"waits": waits})["waits"]
    assert time.monotonic() - t0 < 20.0
    assert stats.host_bound


def test_sampled_candidates_are_verified_on_the_gpu():
    # The pretraining sample check: an honest kernel passes, one that skips rows is `wrong`, garbage
    # never reaches the GPU.
    from training.sampling import check_candidates

    p = Problem(130, 70, 33)
    honest = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()
    partial = (ROOT / "tests" / "adversarial" / "partial_write.cu").read_text()
    checks, summary = check_candidates([(p, honest), (p, partial), (p, "not a kernel")])
    assert [c.verdict for c in checks] == ["ok", "wrong", None]
    assert summary["pass_rate"] == pytest.approx(1 / 3)
    assert summary["checked"].startswith("parse+compile, then verification")


# -- what state carried between timed launches can and cannot buy --------------------------------

@pytest.mark.parametrize("guarded", [False, True])
def test_reused_outputs_are_what_the_guards_close(guarded):
    """Kernels whose shortcuts key on state an earlier timed launch left (tests/adversarial, STATEFUL).
    The shape has few buffer sets (n = 6 or 7 on the H200), so within ten repetitions the timed launches
    reuse outputs. Without the guards they pass as `ok` and the skipper times far below the honest naive
    kernel; with them, each is `wrong` and the honest kernel beside them is not (an input one of them
    modified is put back and blamed on it alone)."""
    paths = [ROOT / f"tests/adversarial/{k}.cu" for k in STATEFUL] + [ROOT / "kernels_corpus/reference/naive.cu"]
    _, results, _ = run(paths, [Problem(64, 4096, 4096)],
                        EvalOptions(reps=10, baselines=("cublas",), fresh_outputs=guarded))
    cands = results[0]["candidates"]
    assert cands["naive"]["status"] == "ok", cands["naive"]
    statuses = {k: cands[k]["status"] for k in STATEFUL}
    if guarded:
        assert statuses == {k: "wrong" for k in STATEFUL}, {k: cands[k].get("error") for k in STATEFUL}
    else:
        # the hole the guards close: accepted, and the skipper faster than the work it claims to do
        assert statuses == {k: "ok" for k in STATEFUL}, {k: cands[k].get("error") for k in STATEFUL}
        assert cands["stale_output"]["time_us"] < 0.5 * cands["naive"]["time_us"], cands


def test_candidates_share_the_timings_outputs(evaluator):
    """The rotating outputs belong to the problem, not to each candidate: timing eight candidates of a
    shape whose C is 134 MB needs no more memory than timing one (each of its own would add three outputs,
    400 MB, a candidate), and each is still checked against the product its last batch wrote."""
    import torch

    from hgemm.pool import compile_all

    problem = Problem(4096, 4096, 64, batch=4)
    text = (ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()
    entries = [e for e, _ in compile_all([(f"mma_sync_{i}", text) for i in range(8)], layouts=("NN",))]
    options = evaluator.options
    evaluator.options = EvalOptions(reps=3, baselines=("cublas",))
    peaks, held = {}, {}
    try:
        for count in (1, 8, 2):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            out = evaluator.run_problem(problem, entries[:count], lambda *_: None)
            peaks[count] = torch.cuda.max_memory_allocated() - before
            held[count] = torch.cuda.memory_allocated() - before  # what the evaluation left allocated
            assert all(r["status"] == "ok" and r["time_us"] > 0 for r in out["candidates"].values()), out["candidates"]
    finally:
        evaluator.options = options
    c_bytes = 2 * problem.batch * problem.M * problem.N
    assert peaks[8] - peaks[1] < c_bytes and abs(peaks[2] - peaks[1]) < c_bytes, peaks
    assert all(h < c_bytes for h in held.values()), held  # nothing C-sized outlives its problem


def test_a_write_into_the_reference_data_is_blamed_on_its_kernel_and_undone(evaluator):
    """A wild write past every guard band can land in the data a problem's candidates share: the float64
    reference, |A| @ |B| (which scales the tolerance) or the pristine input copies. Written here by hand
    between two candidates, as such a write would be: the kernel launched just before is `wrong`, the data
    is drawn again, and the honest kernel after it passes against the true product."""
    import torch

    from hgemm.pool import compile_all

    problem = Problem(96, 80, 112)
    named = [(k, (ROOT / f"kernels_corpus/reference/{k}.cu").read_text()) for k in ("naive", "mma_sync")]
    entries = [e for e, _ in compile_all(named, layouts=("NN",))]
    shared = evaluator.verification_inputs(problem, seed=11)
    first = {name: shared[1][name].clone() for name in ("ref", "absprod", "a0")}
    assert evaluator.verify(entries[0], problem, 1, shared)["status"] == "ok"
    shared[1]["absprod"].fill_(1e30)  # a looser tolerance for whatever runs next
    res = evaluator.verify(entries[0], problem, 2, shared)
    assert res["status"] == "wrong" and "the harness shares between candidates" in res["error"], res
    assert all(torch.equal(shared[1][name], first[name]) for name in first)
    assert evaluator.verify(entries[1], problem, 3, shared)["status"] == "ok"


def test_timing_records_clocks_and_sustained_mode_measures(evaluator):
    from hgemm.timing import Timer

    for method in ("spin_batch", "sustained"):
        timer = Timer(evaluator.util, n_sets=1, reps=5, method=method, clocks=evaluator.clocks)
        stats = timer.time_interleaved({"spin": _spin_launcher(evaluator, 50)})["spin"]
        assert 50 <= stats.median_us <= 50 * 1.05 + 3.0, (method, stats)
        assert stats.clocks and stats.clocks["sm_mhz_max"] > 0, stats  # NVML is on the GPU image

"""CPU tests of the timing guards against state carried between launches (hgemm.rotation, the
module-state rule in hgemm.entry, hgemm.clocks): driven with CPU tensors and Python "kernels"."""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT
from hgemm.clocks import ClockLog, ClockProbe, reason_names
from hgemm.rotation import OutputSlots, RotatingOutputs, SampledReference
from hgemm.summary import clock_cell


def timer_like_calls(n: int, batches: list[int], others: int):
    """Input set indices as the Timer hands them to one contender: consecutive within a batch, with
    `others` launches of other contenders between its batches."""
    offset = 0
    for size in batches:
        for j in range(size):
            yield (offset + j) % n
        offset += size + others


@pytest.mark.parametrize("n,batches,others", [(2, [1] * 12, 1), (3, [7, 7, 7], 5), (4, [1] * 20, 3),
                                              (5, [11, 2, 9], 0), (16, [40, 40], 17)])
def test_every_launch_finds_another_sets_product(n, batches, others):
    pairs = []
    rot = RotatingOutputs(n, lambda i, o: (lambda: pairs.append((i, o))))
    holds = [-1] * (n + 1)
    for i in timer_like_calls(n, batches, others):
        before = len(pairs)
        rot(i)
        (used_i, o), = pairs[before:]
        assert holds[o] != used_i  # stale content is never the answer this launch must produce
        holds[o] = used_i
    assert rot.last == holds


def test_copies_of_one_draw_count_as_the_same_content():
    content = [0, 1, 0, 1, 0, 1]
    seen = []
    rot = RotatingOutputs(6, lambda i, o: (lambda: seen.append((i, o))), content)
    holds = [-1] * 7
    for i in timer_like_calls(6, [5, 5, 5, 1, 1, 1], 6):
        rot(i)
        i_used, o = seen[-1]
        assert holds[o] < 0 or content[holds[o]] != content[i_used]
        holds[o] = i_used


def test_one_distinct_content_is_refused():
    with pytest.raises(ValueError):
        RotatingOutputs(3, lambda i, o: None, [0, 0, 0])


def _sets(n, layout="NN", batch=2, M=33, N=17, K=40):
    """Stacked input sets, (sets, batch, rows, cols), as the evaluator makes them."""
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(n, batch, M, K, generator=gen).half()
    B = torch.randn(n, *((batch, K, N) if layout == "NN" else (batch, N, K)), generator=gen).half()
    return A, B


def _product(a, b, layout):
    b = b.double() if layout == "NN" else b.double().transpose(-1, -2)
    return (a.double() @ b).half()


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_sampled_reference_accepts_the_product_and_refuses_another(layout):
    A, B = _sets(3, layout)
    ref = SampledReference(A, B, layout, torch.Generator().manual_seed(1), chunk_bytes=1)  # one set a chunk
    outs = torch.stack([_product(a, b, layout) for a, b in zip(A, B)])
    assert ref.check(outs, [0, 1, 2], [0, 1, 2]) == ""
    why = ref.check(outs, [0, 1], [0, 2])  # output 1 holds set 1's product, not set 2's
    assert why.startswith("output 1 (input set 2)")
    outs[2, 1, 8:16, :] = float("nan")  # one skipped tile
    assert ref.check(outs, [2], [2])


class LazyKernel:
    """A Python 'kernel' that skips the work when its output already holds numbers."""

    def __init__(self, A, B, outs, layout):
        self.A, self.B, self.outs, self.layout = A, B, outs, layout

    def bind(self, i, o):
        def launch():
            if not torch.isnan(self.outs[o].float()).any():
                return
            self.outs[o].copy_(_product(self.A[i], self.B[i], self.layout))
        return launch


@pytest.mark.parametrize("lazy", [True, False])
def test_a_kernel_that_skips_reused_outputs_is_caught_in_the_first_batch_that_reuses_one(lazy):
    n = 3
    A, B = _sets(n)
    ref = SampledReference(A, B, "NN", torch.Generator().manual_seed(2))
    outs = torch.full((n + 1, 2, 33, 17), float("nan"), dtype=torch.float16)
    kernel = LazyKernel(A, B, outs, "NN")
    bind = kernel.bind if lazy else (lambda i, o: (lambda: outs[o].copy_(_product(A[i], B[i], "NN"))))
    rot = RotatingOutputs(n, bind)
    failures = []
    for batch in range(3):
        for i in range(n):
            rot((batch * n + i) % n)
        rot.check_written(outs, ref)
        failures.append(rot.failure)
    if lazy:
        assert failures[0] == "" and failures[1].startswith("output"), failures  # batch 1 found only poison
    else:
        assert failures == ["", "", ""]
    assert rot.check_written(outs, ref, also=torch.tensor(True)) is True  # a flag read in the same sync


def test_contenders_sharing_outputs_each_find_another_sets_product_and_a_skipper_is_caught():
    # the evaluator's candidates share one pool of outputs: whichever contender last wrote an output,
    # the next launch into it is for another input set, and each batch is checked before the next
    # contender's batch overwrites what it wrote
    n = 3
    A, B = _sets(n)
    ref = SampledReference(A, B, "NN", torch.Generator().manual_seed(2))
    outs = torch.full((n + 1, 2, 33, 17), float("nan"), dtype=torch.float16)
    slots = OutputSlots(n)
    launches = []

    def honest(i, o):
        def launch():
            launches.append((i, o))
            outs[o].copy_(_product(A[i], B[i], "NN"))
        return launch

    lazy = LazyKernel(A, B, outs, "NN")

    def skipper(i, o):
        inner = lazy.bind(i, o)
        return lambda: (launches.append((i, o)), inner())

    rots = {"honest": RotatingOutputs(n, honest, slots=slots), "skipper": RotatingOutputs(n, skipper, slots=slots)}
    holds = [-1] * (n + 1)
    failures = {name: [] for name in rots}
    offset = 0
    for rep in range(4):
        for name in (["honest", "skipper"] if rep % 2 == 0 else ["skipper", "honest"]):
            for j in range(2):
                before = len(launches)
                rots[name]((offset + j) % n)
                (i, o), = launches[before:]
                assert holds[o] != i  # another set's product, whoever wrote it
                holds[o] = i
            offset += 2
            rots[name].check_written(outs, ref)
            failures[name].append(rots[name].failure)
    assert slots.last == holds
    assert failures["honest"] == [""] * 4
    assert failures["skipper"][-1].startswith("output"), failures  # it found numbers and kept them
    with pytest.raises(ValueError):
        RotatingOutputs(n + 1, honest, slots=slots)


def test_an_output_another_contender_overwrote_is_not_blamed_on_the_first():
    # the Timer's untimed warm-up runs every contender before any check: what B left in an output A wrote
    # is B's to answer for
    n = 2
    A, B = _sets(n)
    ref = SampledReference(A, B, "NN", torch.Generator().manual_seed(3))
    outs = torch.full((n + 1, 2, 33, 17), float("nan"), dtype=torch.float16)
    slots = OutputSlots(n)
    honest = RotatingOutputs(n, lambda i, o: (lambda: outs[o].copy_(_product(A[i], B[i], "NN"))), slots=slots)
    garbage = RotatingOutputs(n, lambda i, o: (lambda: outs[o].fill_(1.0)), slots=slots)
    for i in range(3):
        honest(i % n)
    for i in range(3):
        garbage(i % n)  # overwrites outputs honest wrote
    kept = honest.own_written()
    assert kept and set(kept) < honest.written and all(slots.writer[o] is honest for o in kept)
    honest.check_written(outs, ref)
    garbage.check_written(outs, ref)
    assert honest.failure == "" and garbage.failure.startswith("output")


def test_gemm_candidates_may_keep_no_module_state_tasks_may():
    from hgemm.entry import compile_entry

    for name in ("pointer_memo", "result_stash", "cached_result"):
        entry, info = compile_entry(name, (ROOT / f"tests/adversarial/{name}.cu").read_text(), ("NN",), arch="sm_90a")
        assert entry is None and info["status"] == "compile_error", info
        assert "no state between launches" in info["error"]
    honest, info = compile_entry("naive", (ROOT / "kernels_corpus/reference/naive.cu").read_text(), ("NN",), arch="sm_90a")
    assert honest is not None, info
    from kernels_corpus.tasks import get_task

    task = get_task("sum_f32")  # a last-block reduction over module-scope scratch
    assert "__device__" in task.solution
    entry, info = compile_entry("sum", task.solution, ("NN",), arch="sm_90a", variables=tuple(task.variables))
    assert entry is not None, info


def test_clock_log_summary_and_cells():
    log = ClockLog()
    base = {"sm_mhz": 1980, "mem_mhz": 3201, "reasons": 0, "temp_c": 40, "power_w": 300.0, "capped_ns": 1000}
    log.around(base, dict(base, sm_mhz=1755, reasons=0x4, capped_ns=5000))
    s = log.summary()
    assert (s["sm_mhz_min"], s["sm_mhz_max"], s["throttled"], s["capped_us"]) == (1755, 1980, True, 4.0)
    assert s["reasons"] == ["sw_power_cap"]
    assert clock_cell({"clocks": s}) == "1755-1980 (throttled)"
    calm = ClockLog()
    calm.around(base, dict(base, reasons=0x1))
    assert calm.summary()["throttled"] is False and clock_cell({"clocks": calm.summary()}) == "1980"
    assert reason_names(0x41) == ["gpu_idle", "hw_thermal_slowdown"]
    assert ClockLog().summary() is None and clock_cell(None) == "—"
    assert ClockProbe(None).read() is None

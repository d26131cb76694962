"""GPU: every general task's reference solution verifies, and a broken one is caught."""

from __future__ import annotations

import pytest

from hgemm.entry import EvalOptions
from hgemm.judge import KernelJudge
from hgemm.problem import TaskProblem

pytestmark = pytest.mark.gpu


def test_reference_solutions_verify():
    from kernels_corpus.tasks import load_tasks

    tasks = load_tasks()
    with KernelJudge(EvalOptions(timing=False)) as judge:
        verdicts = judge.judge([t.solution for t in tasks],
                               [[TaskProblem.of(t.name, s) for s in t.sizes[:2]] for t in tasks])
    bad = {t.name: (v["status"], v["error"][:300]) for t, v in zip(tasks, verdicts) if v["status"] != "ok"}
    assert not bad, bad


def test_task_solution_timed_against_torch():
    from kernels_corpus.tasks import get_task

    task = get_task("softmax_rows_f32")
    with KernelJudge(EvalOptions(reps=3)) as judge:
        (v,) = judge.judge([task.solution], [[TaskProblem.of(task.name, task.sizes[-1])]])
    assert v["status"] == "ok", v
    r = v["results"][0]
    assert r["time_us"] > 0 and r["speedup_vs_torch"] > 0 and r["best_baseline"] == "torch"


def test_broken_task_solution_is_caught():
    from kernels_corpus.tasks import get_task

    task = get_task("relu_f32")
    broken = task.solution.replace("fmaxf(", "fminf(")  # min(x, 0) instead of max(x, 0)
    assert broken != task.solution
    with KernelJudge(EvalOptions(timing=False)) as judge:
        (v,) = judge.judge([broken], [[TaskProblem.of(task.name, task.sizes[1])]])
    assert v["status"] == "wrong", v


def test_task_kernel_that_skips_reused_outputs_is_caught():
    """A task kernel that returns when its output already holds numbers passes verification (outputs
    are poisoned there) and is caught in timing, where outputs rotate across input draws."""
    from kernels_corpus.tasks import get_task

    task = get_task("relu_f32")
    marker = "float* __restrict__ y, int n) {"
    assert marker in task.solution
    # each block looks at the first element it writes itself, so blocks of one launch do not race
    lazy = task.solution.replace(marker, marker + """
  __shared__ int skip;
  if (threadIdx.x == 0) { const long long at = (long long)blockIdx.x * blockDim.x * 4; skip = at < n && !isnan(y[at]); }
  __syncthreads();
  if (skip) return;""")
    with KernelJudge(EvalOptions(reps=3)) as judge:
        (v,) = judge.judge([lazy], [[TaskProblem.of(task.name, task.sizes[-1])]])
    assert v["status"] == "wrong" and "re-check after timing" in v["error"], v

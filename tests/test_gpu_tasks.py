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

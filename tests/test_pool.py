"""The evaluation pool's supervisor on the CPU: what a job becomes when its worker dies or hangs."""

from types import SimpleNamespace

from hgemm.pool import MAX_LOST_STARTS, EvaluationPool, _JobState, _Worker
from hgemm.problem import Problem


def _held(entries, phase, current):
    job = _JobState(0, Problem(11833, 704, 6464), [SimpleNamespace(name=n) for n in entries])
    return job, _Worker(gpu=0, proc=None, jobs=None, job=job, phase=phase, current=current)


def test_a_job_whose_worker_died_before_beginning_it_goes_back_whole_then_is_classified():
    # a worker that ends after a harness error may be handed the next job before the supervisor sees it
    # exit: nothing of that job ran, so none of its kernels is to blame and none may be lost
    pool = EvaluationPool.__new__(EvaluationPool)
    job, worker = _held(["a", "b", "c"], "verify", -1)
    for _ in range(MAX_LOST_STARTS):
        assert pool._fail_current(worker, "crash") is job
        assert [e.name for e in job.entries] == ["a", "b", "c"] and not job.final
    assert pool._fail_current(worker, "crash") is job
    assert job.entries == [] and sorted(job.final) == ["a", "b", "c"]
    assert all(r["status"] == "crash" and "before the job began" in r["error"] for r in job.final.values())


def test_a_worker_that_died_verifying_a_kernel_blames_that_kernel_and_keeps_the_rest():
    pool = EvaluationPool.__new__(EvaluationPool)
    job, worker = _held(["a", "b", "c"], "verify", 1)
    assert pool._fail_current(worker, "crash") is job
    assert list(job.final) == ["b"] and [e.name for e in job.entries] == ["a", "c"]

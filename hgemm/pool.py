"""Evaluation in worker processes, one per visible GPU, supervised by a watchdog.

A candidate can hang its GPU, fault the context (illegal address: every later call fails), or crash
the process. None of that may stop a training stage, so GPU work happens in child processes: the
parent compiles on all CPU cores, hands each worker one problem with its candidates, and watches the
messages the worker sends as it goes. A worker that goes silent past its deadline is killed; one
that dies is replaced; the candidate it was on is classified `timeout` or `crash`, and the rest of
the job is given to the fresh worker. While timing, the worker says "alive" after every batch (at most
once a second), so the deadline there is for silence, not for the length of the timing. A job for a
general task also carries the task itself, as the caller resolved it (a task pickles by name:
kernels_corpus.tasks).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import shutil
import subprocess
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .entry import Entry, EvalOptions, compile_entry
from .problem import Problem

ALIVE_EVERY_S = 1.0
# A job whose worker died or hung before beginning it goes back to the queue whole this many times; the
# worker may have been on its way out (a harness error ends it) when the job was handed over
MAX_LOST_STARTS = 2


def visible_gpus() -> list[int]:
    """GPU indices this process may use, found without initialising CUDA in the parent."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except subprocess.SubprocessError:
        return []
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    if env is not None:
        ids = [int(x) for x in env.split(",") if x.strip().isdigit()]
        return [i for i in ids if i < count]
    return list(range(count))


def evaluation_gpus(setting: str | list[int], visible: list[int], policy_gpus: int = 1) -> list[int]:
    """The GPUs the evaluation pool times on while a policy trains on the first `policy_gpus` visible
    ones. "auto": the others when there are any (timing then never shares a GPU with training), else
    the same GPUs (the RL step waits for its rewards, so nothing trains while they are timed); "all":
    every visible GPU; a list: those, each of which must be visible."""
    if setting == "auto":
        return visible[policy_gpus:] or visible
    if setting == "all":
        return list(visible)
    missing = [g for g in setting if g not in visible]
    if missing:
        raise ValueError(f"eval_gpus {setting}: GPU(s) {missing} not visible (visible: {visible})")
    return list(setting)


def compile_all(named_texts: list[tuple[str, str]], layouts=("NN", "TN"), arch: str | None = None,
                workers: int | None = None, sass: bool = False) -> list[tuple[Entry | None, dict]]:
    """Parse and compile many candidates in parallel (nvcc runs as subprocesses, so threads suffice);
    sass as in compile_entry."""
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as ex:
        return list(ex.map(lambda nt: compile_entry(nt[0], nt[1], layouts, arch, sass=sass), named_texts))


def _worker_main(gpu: int, options: dict, jobs: mp.Queue, out: mp.Queue, wid: int) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)  # before any CUDA library loads
    # evaluate and runtime load torch and PyCUDA and initialise CUDA: only here, in the worker
    from .evaluate import GemmEvaluator
    from .runtime import ContextLost

    last_alive = [0.0]

    def emit(kind: str, payload: dict) -> None:
        # "alive" comes after every timed batch; one a second is all the watchdog needs
        if kind == "alive":
            now = time.monotonic()
            if now - last_alive[0] < ALIVE_EVERY_S:
                return
            last_alive[0] = now
        out.put((wid, kind, payload))

    try:
        evaluator = GemmEvaluator(EvalOptions(**options))
    except Exception:
        emit("fatal", {"error": traceback.format_exc()})
        return
    try:
        ceilings = evaluator.ceilings()
    except Exception as e:  # a reference figure, not a reason to lose the worker
        ceilings = {"error": f"{type(e).__name__}: {e}"}
    emit("ready", {"ceilings": ceilings})
    while True:
        job = jobs.get()
        if job is None:
            return
        problem, entries, task = job
        try:
            result = evaluator.run_problem(problem, entries, emit, task)
            emit("done", {"result": result})
        except ContextLost:
            return  # the parent sees the exit and replaces this process
        except Exception:
            emit("error", {"error": traceback.format_exc(limit=8)})
            # a harness error may have left the context unusable; start clean
            return


@dataclass
class _JobState:
    index: int
    problem: Problem
    entries: list[Entry]
    task: object = None  # a TaskProblem's task (kernels_corpus.tasks.base.KernelTask)
    final: dict = field(default_factory=dict)  # name -> result fixed by the supervisor (timeout/crash)
    verified: dict = field(default_factory=dict)
    lost_starts: int = 0  # workers that died or hung holding the job before they began it


@dataclass
class _Worker:
    gpu: int
    proc: mp.Process
    jobs: mp.Queue
    job: _JobState | None = None
    phase: str = "idle"
    current: int = -1
    last_seen: float = 0.0
    ready: bool = False
    exiting: bool = False  # reported a harness error, after which the worker process ends: no new job


# a candidate silent this long while it is verified is a hang (`timeout`)
VERIFY_TIMEOUT_S = 60.0


class EvaluationPool:
    def __init__(self, options: EvalOptions | None = None, gpus: list[int] | None = None,
                 verify_timeout_s: float = VERIFY_TIMEOUT_S, timing_timeout_s: float | None = None, start_timeout_s: float = 180.0):
        self.options = options or EvalOptions()
        if timing_timeout_s is None:
            # silence while timing: every batch says "alive", so 120 s is a hang; torch.compile's
            # max-autotune tunes inside the baseline's first call, silent for minutes
            timing_timeout_s = 900.0 if self.options.torch_compile else 120.0
        self.gpus = gpus if gpus is not None else visible_gpus()
        if not self.gpus:
            raise RuntimeError("no GPU visible: evaluation needs one (CPU machines only compile)")
        self.verify_timeout_s = verify_timeout_s
        self.timing_timeout_s = timing_timeout_s
        self.start_timeout_s = start_timeout_s
        self.ctx = mp.get_context("spawn")
        self.out = self.ctx.Queue()
        self.workers: dict[int, _Worker] = {}
        self._next_wid = 0
        self.restarts = 0
        self.ceilings: dict[int, dict] = {}  # per GPU, measured by its first worker: copy GB/s, cuBLAS TFLOP/s
        for gpu in self.gpus:
            self._spawn(gpu)

    def _spawn(self, gpu: int) -> None:
        wid = self._next_wid
        self._next_wid += 1
        jobs = self.ctx.Queue()
        proc = self.ctx.Process(target=_worker_main, args=(gpu, self.options.to_dict(), jobs, self.out, wid), daemon=True)
        proc.start()
        self.workers[wid] = _Worker(gpu, proc, jobs, last_seen=time.monotonic())

    def _replace(self, wid: int) -> None:
        w = self.workers.pop(wid)
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(timeout=30)
        self.restarts += 1
        self._spawn(w.gpu)

    def close(self) -> None:
        for w in self.workers.values():
            if w.proc.is_alive():
                w.jobs.put(None)
        for w in self.workers.values():
            w.proc.join(timeout=10)
            if w.proc.is_alive():
                w.proc.kill()
        self.workers.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fail_current(self, w: _Worker, status: str) -> _JobState | None:
        """Classify what the worker was doing when it hung or died; return the job to requeue, if any."""
        job = w.job
        if job is None:
            return None
        if w.phase == "verify" and w.current < 0:
            # nothing of the job had begun, so nothing in it is to blame: it goes back whole, up to
            # MAX_LOST_STARTS times, and after that every kernel of it is classified
            job.lost_starts += 1
            if job.lost_starts <= MAX_LOST_STARTS:
                return job
            note = f"{status} before the job began, {job.lost_starts} workers in a row (worker on GPU {w.gpu} replaced)"
            job.final.update({e.name: {"status": status, "error": note} for e in job.entries if e.name not in job.final})
            job.entries, job.verified = [], {}
            return job
        reason = f"{status} while {'verifying' if w.phase == 'verify' else 'timing'} (worker on GPU {w.gpu} replaced)"
        if w.phase == "verify" and 0 <= w.current < len(job.entries):
            culprit = job.entries[w.current]
            # a sticky fault was already classified by the worker before it exited: keep its message
            job.final[culprit.name] = job.verified.get(culprit.name) or {"status": status, "error": reason}
            rest = [e for e in job.entries if e.name != culprit.name]
        else:
            # interleaved timing cannot tell which kernel hung; with one candidate it can
            ok = [e for e in job.entries if job.verified.get(e.name, {}).get("status") == "ok"]
            note = reason if len(ok) == 1 else reason + f"; not attributable among {len(ok)} candidates timed together"
            for e in ok:
                job.final[e.name] = {"status": status, "error": note}
            rest = []
        remaining = [e for e in rest if e.name not in job.final]
        job.entries, job.verified = remaining, {}
        return job

    def run(self, jobs: list[tuple], progress=None) -> list[dict]:
        """Evaluate every (problem, entries) job, or (problem, entries, task) for a TaskProblem; one
        result dict per job, in order."""
        pending = deque(_JobState(i, problem, list(entries), *task)
                        for i, (problem, entries, *task) in enumerate(jobs))
        results: list[dict | None] = [None] * len(jobs)
        done = 0
        while done < len(jobs):
            for wid, w in list(self.workers.items()):
                if w.ready and not w.exiting and w.job is None and pending:
                    job = pending.popleft()
                    if not job.entries:  # everything was classified by the supervisor
                        results[job.index] = {"problem": job.problem.to_dict(), "candidates": dict(job.final)}
                        done += 1
                        if progress:
                            progress(1)
                        continue
                    w.job, w.phase, w.current, w.last_seen = job, "verify", -1, time.monotonic()
                    w.jobs.put((job.problem, job.entries, job.task))
            try:
                wid, kind, payload = self.out.get(timeout=0.5)
            except queue.Empty:
                wid = None
            if wid is not None and wid in self.workers:
                w = self.workers[wid]
                w.last_seen = time.monotonic()
                if kind == "ready":
                    w.ready = True
                    self.ceilings.setdefault(w.gpu, payload.get("ceilings"))
                elif kind == "fatal":
                    raise RuntimeError(f"evaluation worker on GPU {w.gpu} could not start:\n{payload['error']}")
                elif kind == "begin":
                    w.phase, w.current = payload["phase"], payload["index"]
                elif kind == "verified" and w.job is not None:
                    w.job.verified[w.job.entries[payload["index"]].name] = payload["result"]
                elif kind in ("done", "error") and w.job is not None:
                    job = w.job
                    if kind == "done":
                        res = payload["result"]
                    else:
                        w.exiting = True  # _worker_main returns after a harness error; replaced once it has
                        res = {"problem": job.problem.to_dict(), "harness_error": payload["error"],
                               "candidates": {e.name: {"status": "harness_error", "error": payload["error"][-2000:]}
                                              for e in job.entries}}
                    res["candidates"].update(job.final)
                    results[job.index] = res
                    done += 1
                    if progress:
                        progress(1)
                    w.job, w.phase = None, "idle"
            now = time.monotonic()
            for wid, w in list(self.workers.items()):
                dead = not w.proc.is_alive()
                if not w.ready:
                    if dead or now - w.last_seen > self.start_timeout_s:
                        raise RuntimeError(f"evaluation worker on GPU {w.gpu} died or hung while starting")
                    continue
                limit = self.verify_timeout_s if w.phase == "verify" else self.timing_timeout_s
                if w.job is not None and (dead or now - w.last_seen > limit):
                    job = self._fail_current(w, "crash" if dead else "timeout")
                    if job is not None:
                        pending.appendleft(job)
                    self._replace(wid)
                elif dead or (w.exiting and now - w.last_seen > self.verify_timeout_s):
                    self._replace(wid)
        return results  # type: ignore[return-value]

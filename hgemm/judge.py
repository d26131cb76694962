"""Verdicts on model-written kernels, for RL rewards and sampling: one call, many candidates.

    judge = KernelJudge(EvalOptions(reps=3, baselines=("cublas", "torch")))
    verdicts = judge.judge(texts, [[Problem(1024, 1024, 1024)], ...])   # texts[i] on problems[i]
    judge.close()

Compiles run in parallel on all CPU cores; with a GPU, candidates are verified and timed in the
worker pool (grouped per problem, so baselines are timed once per problem and interleaved with every
candidate). Without a GPU the verdict is `compiled` (or the parse/compile failure): nothing is timed.
A verdict never raises for a bad kernel.
"""

from __future__ import annotations

import copy
import math
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

from .candidate import GEMM_VARIABLES, code_identity
from .entry import STATUSES, EvalOptions, compile_entry
from .pool import VERIFY_TIMEOUT_S, EvaluationPool, visible_gpus
from .problem import Problem, TaskProblem


def worst_status(statuses: list[str]) -> str:
    ranked = [s for s in statuses if s in STATUSES]
    return min(ranked, key=STATUSES.index) if ranked else (statuses[0] if statuses else "ok")


def task_of(problem):
    """The general task (kernels_corpus.tasks) a TaskProblem is a size of; None for a GEMM problem."""
    if not isinstance(problem, TaskProblem):
        return None
    from kernels_corpus.tasks import get_task  # the task suite imports torch

    return get_task(problem.task)


def _variables(problem) -> tuple[str, ...]:
    task = task_of(problem)
    return GEMM_VARIABLES if task is None else tuple(task.variables)


class KernelJudge:
    def __init__(self, options: EvalOptions | None = None, gpu: bool | None = None, arch: str | None = None,
                 verify_timeout_s: float = VERIFY_TIMEOUT_S, timing_timeout_s: float | None = None, compile_workers: int | None = None,
                 gpus: list[int] | None = None):
        self.options = options or EvalOptions()
        self.gpu = bool(visible_gpus()) if gpu is None else gpu
        self.arch = arch
        self.compile_workers = compile_workers
        # gpus: where the pool times (None: every visible GPU); see hgemm.pool.evaluation_gpus
        self._pool_kw = {"verify_timeout_s": verify_timeout_s, "timing_timeout_s": timing_timeout_s, "gpus": gpus}
        self._pool = None
        # seconds per phase, summed over every call (a caller reads the difference across its own calls):
        # the GPU evaluations' (hgemm.entry.EVAL_PHASES) and the judge's own (JUDGE_PHASES)
        self.phase_seconds: Counter = Counter()

    @property
    def pool(self):
        if self._pool is None:
            self._pool = EvaluationPool(self.options, **self._pool_kw)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def judge(self, texts: list[str], problems: list[list[Problem | TaskProblem]]) -> list[dict]:
        """One verdict per text: status (the worst over its problems), error, per-problem results, and
        for verified-and-timed kernels the geometric-mean speedups over its problems.

        Copies of one kernel on the same problems (one code_identity: texts that differ in comments,
        whitespace or the entry's name only) are judged once and get equal verdicts: timed side by side
        they would cost GPU time and differ by timing noise alone, which an RL group would read as a
        difference between identical completions."""
        if len(texts) != len(problems):
            raise ValueError("one problem list per text")
        keys = [(code_identity(text), tuple(p.key for p in plist)) for text, plist in zip(texts, problems)]
        first: dict[tuple, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        verdicts = self._judge_distinct([texts[i] for i in first.values()], [problems[i] for i in first.values()])
        by_key = dict(zip(first, verdicts))
        return [copy.deepcopy(by_key[key]) for key in keys]

    def _judge_distinct(self, texts: list[str], problems: list[list[Problem | TaskProblem]]) -> list[dict]:
        """judge, for texts that are all different (or on different problems)."""

        def compile_one(i: int):
            first = problems[i][0]
            layouts = tuple(sorted({p.layout for p in problems[i]}))
            return compile_entry(f"c{i}", texts[i], layouts, self.arch, _variables(first))

        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.compile_workers) as ex:
            compiled = list(ex.map(compile_one, range(len(texts))))
        self.phase_seconds["compile"] += time.perf_counter() - began

        verdicts: list[dict] = []
        by_problem: dict[object, list] = defaultdict(list)
        for i, (entry, info) in enumerate(compiled):
            v = {"status": info["status"], "error": info.get("error", ""), "compile": info, "results": []}
            verdicts.append(v)
            if entry is None:
                continue
            for p in problems[i]:
                if p.layout not in entry.cubins:
                    v["results"].append({"problem": p.to_dict(), "status": "unsupported",
                                         "error": f"candidate does not implement layout {p.layout}"})
                elif self.gpu:
                    by_problem[p].append((i, entry))
                else:
                    v["results"].append({"problem": p.to_dict(), "status": "compiled"})
        if by_problem:
            keys = list(by_problem)
            # the instrument gets each task itself, resolved here (the kernels layer owns the suite)
            began = time.perf_counter()
            outs = self.pool.run([(p, [e for _, e in by_problem[p]], task_of(p)) for p in keys])
            pool_seconds = time.perf_counter() - began
            for out in outs:
                phases = out.get("seconds") or {}
                self.phase_seconds.update(phases)
                pool_seconds -= sum(phases.values())
            self.phase_seconds["pool_rest"] += max(0.0, pool_seconds)
            for p, out in zip(keys, outs):
                for i, entry in by_problem[p]:
                    r = dict(out["candidates"].get(entry.name, {"status": "harness_error", "error": "no result"}))
                    r["problem"] = p.to_dict()
                    r["best_baseline"] = out.get("best_baseline")
                    r["best_baseline_us"] = out.get("best_baseline_us")
                    verdicts[i]["results"].append(r)
        for v in verdicts:
            if v["status"] in ("parse_error", "compile_error") or not v["results"]:
                continue
            statuses = [r["status"] for r in v["results"]]
            v["status"] = "compiled" if all(s == "compiled" for s in statuses) else worst_status(statuses)
            v["error"] = next((r.get("error", "") for r in v["results"] if r["status"] == v["status"] and r.get("error")), "")
            if v["status"] == "ok":
                for key in ("speedup_vs_best", "speedup_vs_cublas", "speedup_vs_torch"):
                    xs = [r[key] for r in v["results"] if r.get(key)]
                    if len(xs) == len(v["results"]):
                        v[key] = math.exp(sum(math.log(x) for x in xs) / len(xs))
        return verdicts

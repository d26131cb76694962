"""Benchmark candidates over problems: compile all of them in parallel, then (where a GPU is visible)
verify and time each problem's candidates against the baselines in the worker pool. One results dict
(environment, options, per-candidate compile info, per-problem results), which `hgemm bench`,
hgemm.tune and the bench stage write and hgemm.summary and the report read."""

from __future__ import annotations

import sys
from typing import Callable

from tqdm import tqdm

from .compile import detect_arch
from .entry import EvalOptions
from .envinfo import environment
from .pool import EvaluationPool, compile_all, visible_gpus
from .problem import Problem


def run_bench(named: list[tuple[str, str]], problems, options: EvalOptions, arch: str | None = None,
              progress: bool = True, select: Callable[[Problem, str], bool] | None = None) -> dict:
    """Compile everything, then (where a GPU is visible) evaluate every problem. Library entry point
    of `hgemm bench`, also used by hgemm.tune and the bench stage. `select(problem, name)`
    limits which candidates run on which problem (default: all on all)."""
    chosen = (lambda p, n: True) if select is None else select
    layouts = tuple(sorted({p.layout for p in problems}))
    compiled = compile_all(named, layouts, arch, sass=True)
    cand_info = {name: info for (name, _), (_, info) in zip(named, compiled)}
    entries = [e for e, _ in compiled if e is not None]
    gpus = visible_gpus()
    out = {"env": environment(options.timing_method), "options": options.to_dict(), "arch": arch or detect_arch(),
           "gpu_run": bool(gpus), "candidates": cand_info, "problems": []}
    if not gpus:
        out["note"] = "compiled, not run: no GPU visible"
        for p in problems:
            out["problems"].append({"problem": p.to_dict(), "candidates": {
                name: ({"status": "compiled"} if info["status"] == "compiled" else info)
                for name, info in cand_info.items() if chosen(p, name)}})
        return out
    jobs = [(p, [e for e in entries if p.layout in e.cubins and chosen(p, e.name)]) for p in problems]
    bar = None
    if progress:
        bar = tqdm(total=len(jobs), desc="problems", file=sys.stderr)
    with EvaluationPool(options, gpus) as pool:
        results = pool.run(jobs, progress=bar.update if bar else None)
        out["worker_restarts"] = pool.restarts
        out["gpus_used"] = list(pool.gpus)  # one worker process per GPU
        out["ceilings"] = pool.ceilings
    if bar:
        bar.close()
    for p, res in zip(problems, results):
        # compile failures are results too, so every candidate appears on every problem
        for name, info in cand_info.items():
            if info["status"] != "compiled" and chosen(p, name):
                res["candidates"][name] = info
        out["problems"].append(res)
    return out

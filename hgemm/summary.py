"""Summaries of a bench results file: per shape class and per candidate, as rows and as Markdown."""

from __future__ import annotations

import math
from collections import defaultdict


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def best_candidate_per_problem(results: dict) -> dict[str, tuple[str, dict]]:
    """problem key -> (candidate name, its result) for the fastest verified candidate."""
    best = {}
    for pr in results["problems"]:
        ok = [(n, r) for n, r in pr["candidates"].items() if r.get("status") == "ok" and r.get("time_us")]
        if ok:
            p = pr["problem"]
            key = f"b{p['batch']}_m{p['M']}_n{p['N']}_k{p['K']}_{p['layout']}"
            best[key] = min(ok, key=lambda nr: nr[1]["time_us"])
    return best


def class_rows(results: dict) -> list[dict]:
    """One row per (shape class, candidate): shapes, ok count, geomean speedups, worst speedup vs best."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for pr in results["problems"]:
        cls = pr["problem"].get("shape_class", "adhoc")
        for name, r in pr["candidates"].items():
            groups[(cls, name)].append(r)
    rows = []
    for (cls, name), rs in sorted(groups.items()):
        statuses = defaultdict(int)
        for r in rs:
            statuses[r.get("status", "?")] += 1
        vs_best = [r["speedup_vs_best"] for r in rs if r.get("status") == "ok" and r.get("speedup_vs_best")]
        vs_cublas = [r["speedup_vs_cublas"] for r in rs if r.get("status") == "ok" and r.get("speedup_vs_cublas")]
        rows.append({
            "class": cls, "candidate": name, "shapes": len(rs), "ok": statuses.get("ok", 0),
            "statuses": dict(statuses),
            "geomean_vs_cublas": geomean(vs_cublas), "geomean_vs_best": geomean(vs_best),
            "min_vs_best": min(vs_best) if vs_best else None,
        })
    return rows


def _fmt(x, digits=3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(results: dict, title: str = "HGEMM benchmark") -> str:
    env = results.get("env", {})
    gpus = env.get("gpus") or [{}]
    lines = [f"# {title}", ""]
    if not results.get("gpu_run"):
        lines += ["**Nothing was timed: no GPU on this machine. Kernels were parsed and compiled only.**", ""]
    lines += [
        f"- GPU: {gpus[0].get('name', 'none')}, driver {gpus[0].get('driver_version', '—')}, "
        f"SM clock at start {gpus[0].get('clocks.sm', '—')} (max {gpus[0].get('clocks.max.sm', '—')})",
        f"- CUDA (nvcc) {env.get('nvcc')}, torch {env.get('packages', {}).get('torch')}, "
        f"timing method {results.get('options', {}).get('timing_method', '—')}",
        f"- grid: {results.get('grid')}, {len(results.get('problems', []))} problems",
        "",
        "| class | candidate | shapes | ok | geomean vs cuBLAS | geomean vs best baseline | worst vs best |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in class_rows(results):
        lines.append(f"| {r['class']} | {r['candidate']} | {r['shapes']} | {r['ok']} | "
                     f"{_fmt(r['geomean_vs_cublas'])} | {_fmt(r['geomean_vs_best'])} | {_fmt(r['min_vs_best'])} |")
    if results.get("gpu_run"):
        lines += ["", "## Per shape", "",
                  "| shape | best baseline | its µs | its TFLOP/s | best candidate | µs | TFLOP/s | vs best |",
                  "|---|---|---:|---:|---|---:|---:|---:|"]
        best = best_candidate_per_problem(results)
        for pr in results["problems"]:
            p = pr["problem"]
            key = f"b{p['batch']}_m{p['M']}_n{p['N']}_k{p['K']}_{p['layout']}"
            bb = pr.get("best_baseline")
            b_us = pr.get("best_baseline_us")
            b_tf = pr["baselines"][bb]["tflops"] if bb else None
            name, r = best.get(key, ("—", {}))
            lines.append(f"| {key} | {bb or '—'} | {_fmt(b_us, 1)} | {_fmt(b_tf, 1)} | {name} | "
                         f"{_fmt(r.get('time_us'), 1)} | {_fmt(r.get('tflops'), 1)} | {_fmt(r.get('speedup_vs_best'))} |")
    return "\n".join(lines) + "\n"

"""Summaries of a bench results file: per shape class and per candidate, as rows and as Markdown."""

from __future__ import annotations

import math
from collections import defaultdict

from .entry import NOTHING_TO_PAD
from .problem import Problem


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def measurably_faster(a: dict, b: dict) -> bool:
    """Whether verified result a ran faster than b beyond the run's repetition spread: a's slowest tenth
    (p90) below b's fastest tenth (p10), both timed in one run. Two timings of one kernel differ by
    noise, so a strict comparison of medians would call one of them faster about half the time. Results
    without repetition percentiles compare their times."""
    if not (a.get("status") == "ok" and b.get("status") == "ok" and a.get("time_us") and b.get("time_us")):
        return False
    ta, tb = a.get("timing") or {}, b.get("timing") or {}
    if ta.get("p90_us") and tb.get("p10_us"):
        return ta["p90_us"] < tb["p10_us"]
    return a["time_us"] < b["time_us"]


# Name prefix of a kernel timed only for comparison (a tune beside a library: the kernel its winner
# would replace); it is never a shape's best candidate.
BESIDE = "beside:"


def best_candidate_per_problem(results: dict) -> dict[str, tuple[str, dict]]:
    """problem key -> (candidate name, its result) for the fastest verified candidate."""
    best = {}
    for pr in results["problems"]:
        ok = [(n, r) for n, r in pr["candidates"].items() if r.get("status") == "ok" and r.get("time_us")
              and not n.startswith(BESIDE)]
        if ok:
            p = pr["problem"]
            key = Problem.from_dict(p).key
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
    ]
    if not_run := _not_run_text(results):
        lines.append(f"- **baselines not run** (the strongest baseline there is of the others): {not_run}")
    lines += [
        "",
        "| class | candidate | shapes | ok | geomean vs cuBLAS | geomean vs best baseline | worst vs best |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in class_rows(results):
        lines.append(f"| {r['class']} | {r['candidate']} | {r['shapes']} | {r['ok']} | "
                     f"{_fmt(r['geomean_vs_cublas'])} | {_fmt(r['geomean_vs_best'])} | {_fmt(r['min_vs_best'])} |")
    if results.get("gpu_run"):
        throttled = throttled_contenders(results)
        lines += ["", f"Throttled contenders (NVML slowdown reasons or power/thermal capping during their "
                      f"batches): {', '.join(throttled) if throttled else 'none'}."]
        lines += ["", "## Per shape", "",
                  "SM MHz: the SM clock NVML read before and after each contender's batches (min-max).", "",
                  "| shape | best baseline | its µs | its TFLOP/s | its SM MHz | best candidate | µs | TFLOP/s | its SM MHz | vs best |",
                  "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
        best = best_candidate_per_problem(results)
        for pr in results["problems"]:
            p = pr["problem"]
            key = Problem.from_dict(p).key
            bb = pr.get("best_baseline")
            b_us = pr.get("best_baseline_us")
            b_tf = pr["baselines"][bb]["tflops"] if bb else None
            b_clk = clock_cell(pr["baselines"][bb].get("timing")) if bb else "—"
            name, r = best.get(key, ("—", {}))
            lines.append(f"| {key} | {bb or '—'} | {_fmt(b_us, 1)} | {_fmt(b_tf, 1)} | {b_clk} | {name} | "
                         f"{_fmt(r.get('time_us'), 1)} | {_fmt(r.get('tflops'), 1)} | {clock_cell(r.get('timing'))} | "
                         f"{_fmt(r.get('speedup_vs_best'))} |")
    return "\n".join(lines) + "\n"


def clock_cell(timing: dict | None) -> str:
    """'1980' or '1755-1980', with ' (throttled)' where NVML saw a slowdown; '—' without readings."""
    clocks = (timing or {}).get("clocks")
    if not clocks:
        return "—"
    lo, hi = clocks["sm_mhz_min"], clocks["sm_mhz_max"]
    return (f"{hi}" if lo == hi else f"{lo}-{hi}") + (" (throttled)" if clocks.get("throttled") else "")


def throttled_contenders(results: dict) -> list[str]:
    """'shape: contender' for every contender whose timing ran throttled."""
    out = []
    for pr in results.get("problems", []):
        key = Problem.from_dict(pr["problem"]).key
        timed = [(n, b.get("timing")) for n, b in pr.get("baselines", {}).items()]
        timed += [(n, r.get("timing")) for n, r in pr.get("candidates", {}).items()]
        out += [f"{key}: {n}" for n, t in timed if ((t or {}).get("clocks") or {}).get("throttled")]
    return out


# The seed library's targets, per shape class: (label, which problems, what is compared, the bar).
GOALS = (
    ("misaligned cubes and one odd dimension", lambda p: p["shape_class"] == "misaligned", "vs_best", 1.1),
    ("aligned >= 2048^3", lambda p: p["shape_class"] == "aligned" and p["M"] >= 2048, "vs_cublas", 0.95),
    ("aligned 4096^3", lambda p: p["shape_class"] == "aligned" and p["M"] == 4096, "vs_cublas", 1.0),
    ("M <= 16, N and K >= 4096", lambda p: p["M"] <= 16 and min(p["N"], p["K"]) >= 4096, "bandwidth", 0.85),
    ("batch >= 16, sizes <= 512", lambda p: p["batch"] >= 16 and max(p["M"], p["N"], p["K"]) <= 512, "vs_cublas", 1.2),
)


def _instruction_path(name: str, res: dict) -> str:
    """The tensor-core path from the kernel's SASS when it was read (hgemm.sass), else from its name."""
    mix = res.get("sass")
    if mix:
        return mix["path"]
    return ("HGMMA (wgmma)" if name.startswith("wgmma") else "HMMA (mma.sync)") + ", by name (no SASS read)"


def roofline_us(p: dict, tflops: float | None, gbps: float | None) -> tuple[float | None, str]:
    """(time, bound) of the simplest roofline for problem p: its flops at the compute ceiling against its
    compulsory bytes (A, B read once, C written once) at the copy ceiling, whichever is longer."""
    b = p.get("batch", 1)
    flops = 2.0 * p["M"] * p["N"] * p["K"] * b
    nbytes = 2.0 * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]) * b
    t_compute = flops / (tflops * 1e12) * 1e6 if tflops else None
    t_memory = nbytes / (gbps * 1e9) * 1e6 if gbps else None
    if t_compute is None or t_memory is None:
        return None, "—"
    return (t_compute, "compute") if t_compute >= t_memory else (t_memory, "memory")


def baselines_not_run(results: dict) -> dict[str, tuple[int, str]]:
    """Per baseline the run asked for but could not time on some problems (a package missing on the
    machine, the library failing on a shape): on how many problems, and the first reason. Pad-to-8 cuBLAS
    on aligned shapes is not one of them. On those problems "the strongest baseline" is of the others."""
    out: dict[str, tuple[int, str]] = {}
    for pr in results.get("problems", []):
        for name, why in (pr.get("baselines_skipped") or {}).items():
            if why != NOTHING_TO_PAD:
                n, first = out.get(name, (0, why))
                out[name] = (n + 1, first)
    return out


def _not_run_text(results: dict) -> str:
    """'cublaslt on 59 problems (why); ...', or '' where every baseline the run asked for ran."""
    return "; ".join(f"{name} on {n} problems ({why})" for name, (n, why) in sorted(baselines_not_run(results).items()))


def _baselines_line(options: dict, results: dict) -> str:
    """Which baselines "the strongest" was taken from: the targets' bar includes torch.compile, which
    tuning leaves out by default (minutes of autotuning per shape), and a baseline the machine could not
    run is named."""
    timed = list(options.get("baselines") or [])
    if options.get("torch_compile") and "torch_compile" not in timed:
        timed.append("torch_compile")
    line = "Strongest baseline per shape, of: " + (", ".join(timed) or "none recorded") + "."
    if not_run := _not_run_text(results):
        line += f" **Not run:** {not_run}."
    if "torch_compile" not in timed:
        line += (" torch.compile max-autotune was not timed in this run, so on misaligned shapes, where"
                 " it is often the strongest, the bar here is lower than the targets'.")
    return line


def goals_markdown(results: dict) -> str:
    """The fastest verified kernel per shape against the per-class targets, with each miss's
    resource use, instruction path and distance from the roofline of the same run."""
    best = best_candidate_per_problem(results)
    ceilings = next(iter((results.get("ceilings") or {}).values()), None) or {}
    copy_gbps = ceilings.get("copy_gbps")
    peak_tflops = ceilings.get("cublas_fp16_tflops_8192")  # what cuBLAS reaches at 8192^3: an attained ceiling
    rows = []
    for pr in results["problems"]:
        p = pr["problem"]
        key = Problem.from_dict(p).key
        if key not in best:
            continue
        name, r = best[key]
        cublas = (pr.get("baselines") or {}).get("cublas", {})
        res = (results.get("candidates", {}).get(name, {}).get("resources") or {}).get(p["layout"], {})
        rows.append({"key": key, "p": p, "name": name, "r": r, "cublas_tflops": cublas.get("tflops"),
                     "gbps": r.get("gbps"), "res": res})
    lines = ["# Seed library against its per-class targets", "",
             "Per shape the fastest verified kernel; bars from hgemm.summary.GOALS. "
             + (f"Copy bandwidth in this run: {copy_gbps:.0f} GB/s"
                + (f" (write-only: {ceilings['write_gbps']:.0f} GB/s)." if ceilings.get("write_gbps") else ".")
                if copy_gbps else
                "The device-to-device copy bandwidth was not measured in this run (the harness records it "
                "from now on), so the bandwidth goal is shown in GB/s only."), "",
             _baselines_line(results.get("options") or {}, results), "",
             "| class | shapes | measure | geomean | worst | goal | met |", "|---|---:|---|---:|---:|---:|---|"]
    misses = []
    for label, pick, measure, bar in GOALS:
        sel = [x for x in rows if pick(x["p"])]
        if not sel:
            continue
        if measure == "bandwidth":
            vals = [x["gbps"] / copy_gbps if copy_gbps else None for x in sel]
            shown = [x["gbps"] for x in sel]
            if not copy_gbps:
                lines.append(f"| {label} | {len(sel)} | GB/s | {geomean(shown):.0f} | {min(shown):.0f} | "
                             f"{bar:.0%} of copy | not measured |")
                continue
        else:
            vals = [x["r"].get("speedup_vs_best" if measure == "vs_best" else "speedup_vs_cublas") for x in sel]
        g, worst = geomean(vals), min(v for v in vals if v)
        met = all(v >= bar for v in vals)
        lines.append(f"| {label} | {len(sel)} | {measure} | {g:.3f} | {worst:.3f} | {bar} | {'yes' if met else 'no'} |")
        misses += [(label, x, v) for x, v in zip(sel, vals) if v is not None and v < bar]
    all_best = [x["r"].get("speedup_vs_best") for x in rows]
    all_cublas = [x["r"].get("speedup_vs_cublas") for x in rows]
    lines += ["", f"Whole grid ({len(rows)} shapes): geomean {geomean(all_cublas):.3f}x cuBLAS (goal 1.15), "
              f"{geomean(all_best):.3f}x the strongest baseline (goal 1.0); worst {min(all_best):.3f} (goal 0.9).", "",
              "## Misses", "",
              "Roofline: the longer of the flops at the compute ceiling (cuBLAS at 8192³ in this run"
              + (f", {peak_tflops:.0f} TFLOP/s" if peak_tflops else ", not measured") + ") and the compulsory bytes "
              "(A and B read once, C written once) at the copy bandwidth; *of roofline* is that time over the "
              "kernel's.", "",
              "| shape | class goal | measured | kernel | path | regs | static smem B | TFLOP/s | cuBLAS TFLOP/s "
              "| bound | roofline µs | kernel µs | of roofline |",
              "|---|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for label, x, v in misses:
        t_roof, bound = roofline_us(x["p"], peak_tflops, copy_gbps)
        t = x["r"].get("time_us")
        lines.append(f"| {x['key']} | {label} | {v:.3f} | {x['name']} | {_instruction_path(x['name'], x['res'])} | "
                     f"{x['res'].get('registers', '—')} | {x['res'].get('smem_static', '—')} | "
                     f"{x['r'].get('tflops', 0):.0f} | {x['cublas_tflops'] or 0:.0f} | {bound} | "
                     f"{_fmt(t_roof, 1)} | {_fmt(t, 1)} | {_fmt(t_roof / t if t_roof and t else None, 3)} |")
    return "\n".join(lines) + "\n"


def beside_markdown(table: dict) -> str:
    """A re-tune against the library it would replace, shape by shape: the new winner's time over the
    old kernel's, both timed in the same run (a tune's table entries with `beside`)."""
    rows = [(key, e) for key, e in table.get("entries", {}).items() if (e.get("beside") or {}).get("time_ratio")]
    lines = ["# Re-tune beside the current library", "",
             "Per shape the new winner and the kernel the current library dispatches there, timed in one run; "
             "time ratio below 1 is faster.", "",
             "| shape | current kernel | its µs | new kernel | µs | new / current |", "|---|---|---:|---|---:|---:|"]
    for key, e in sorted(rows, key=lambda kv: -kv[1]["beside"]["time_ratio"]):
        b = e["beside"]
        lines.append(f"| {key} | {b['kernel']} | {_fmt(b['time_us'], 1)} | {e['kernel']} | {_fmt(e['time_us'], 1)} | "
                     f"{_fmt(b['time_ratio'])} |")
    unmeasured = sorted(key for key, e in table.get("entries", {}).items() if key not in dict(rows))
    ratios = [e["beside"]["time_ratio"] for _, e in rows]
    lines += ["", f"{len(rows)} shapes timed beside the current kernel"
              + (f": new / current geomean {geomean(ratios):.4f}, worst {max(ratios):.4f}, "
                 f"{sum(r <= 1.02 for r in ratios)} at most 2% slower, {sum(r < 1 / 1.02 for r in ratios)} more than "
                 f"2% faster." if rows else ".")]
    if unmeasured:
        lines.append(f"Without a timed current kernel: {', '.join(unmeasured)}.")
    return "\n".join(lines) + "\n"


def libraries_markdown(results: dict, prefixes: list[str]) -> str:
    """Libraries timed side by side (candidates `<prefix>:<kernel>`): per library, over all shapes, each
    shape class and the TN shapes with an odd N or K, the geomean and worst speedup over each shape's
    strongest baseline, and on how many shapes it is the fastest of the libraries."""
    per: dict[str, dict[str, float]] = {prefix: {} for prefix in prefixes}
    problems: dict[str, Problem] = {}
    for pr in results.get("problems", []):
        problem = Problem.from_dict(pr["problem"])
        for name, r in pr.get("candidates", {}).items():
            prefix = name.split(":", 1)[0]
            if prefix in per and r.get("status") == "ok" and r.get("speedup_vs_best"):
                per[prefix][problem.key] = r["speedup_vs_best"]
                problems[problem.key] = problem
    shared = sorted(set.intersection(*(set(v) for v in per.values()))) if per else []
    subsets = [("all", shared)]
    subsets += [(f"class {c}", [k for k in shared if problems[k].shape_class == c])
                for c in sorted({problems[k].shape_class for k in shared})]
    subsets.append(("TN, odd N or K", [k for k in shared if problems[k].layout == "TN"
                                        and (problems[k].N % 2 or problems[k].K % 2)]))
    not_run = _not_run_text(results)
    not_run = f" **Baselines not run:** {not_run}." if not_run else ""
    lines = ["## Libraries side by side", "",
             f"{len(shared)} shapes where every library's kernel verified and was timed; speedup over each "
             f"shape's strongest baseline in the same run.{not_run}", "",
             "| shapes | n | library | geomean | worst | ≥ 1.0 | < 0.8 | fastest of the libraries |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for label, keys in subsets:
        if not keys:
            continue
        for prefix, speed in per.items():
            vals = [speed[k] for k in keys]
            wins = sum(all(speed[k] >= per[o][k] for o in per if o != prefix) for k in keys)
            lines.append(f"| {label} | {len(keys)} | {prefix} | {_fmt(geomean(vals))} | {_fmt(min(vals))} | "
                         f"{sum(v >= 1.0 for v in vals)} | {sum(v < 0.8 for v in vals)} | {wins} |")
        if len(per) > 1:  # what a perfect choice between the libraries would reach: how much is dispatch
            vals = [max(speed[k] for speed in per.values()) for k in keys]
            lines.append(f"| {label} | {len(keys)} | the faster per shape | {_fmt(geomean(vals))} | {_fmt(min(vals))} | "
                         f"{sum(v >= 1.0 for v in vals)} | {sum(v < 0.8 for v in vals)} | — |")
    return "\n".join(lines) + "\n"

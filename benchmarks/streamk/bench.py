"""Stream-K against the whole-tile kernel it extends and against a library, in one bench run.

On every shape of a grid: the three wgmma stream-K variants (`streamk`, hgemm/streamk.cuh) that apply
and hgemm.tune.estimate ranks first, each with its whole-tile twin (the same tile, ring and epilogue
without stream-K), and the library's choice, all verified on fresh random inputs and timed beside every
baseline. The table sets each measured ratio to the twin beside the one the estimate predicts (the
busiest CTA's k tiles against the twin's rounds of tiles), so a run says both what stream-K gained and
whether the model of why was right.

    python benchmarks/streamk/bench.py LIBRARY --grid benchmarks/streamk/shapes.yaml --out OUT.json

Without a GPU the candidates are compiled and the table says nothing was timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hgemm.bench import run_bench
from hgemm.entry import EvalOptions
from hgemm.library import Library
from hgemm.problem import Problem, load_grid
from hgemm.summary import geomean
from hgemm.tune import estimate
from kernels_corpus.families import wgmma

MARGIN = 1.02  # faster by more than this: beyond the run's repetition spread
TOP = 3  # stream-K tiles a shape, the estimate's first: a 64 x 64 tile on 16384^3 would only cost time


def candidates(problems, library: Library, top: int = TOP) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    """(name, text) of every kernel the run needs, and per problem key the names it times there: the
    `top` stream-K variants the estimate ranks first on the shape, their twins, the library's choice."""
    texts, wanted = {}, {}
    for p in problems:
        names = set()
        fits = [v for v in wgmma.variants() if v.get("streamk") and wgmma.applicable(v, p)]
        for v in sorted(fits, key=lambda v: estimate(v, p))[:top]:
            for q in (v, wgmma.whole_tile(v)):
                texts[wgmma.name(q)] = wgmma.render(q)
                names.add(wgmma.name(q))
        choice = library.lookup(p)
        texts[f"library:{choice.name}"] = choice.candidate.source
        wanted[p.key] = names | {f"library:{choice.name}"}
    return sorted(texts.items()), wanted


def rows(results: dict) -> list[dict]:
    """Per shape: the best stream-K variant against its twin and against the library's choice."""
    params = {wgmma.name(v): v for v in wgmma.variants() if v.get("streamk")}
    out = []
    for pr in results["problems"]:
        times = {n: r["time_us"] for n, r in pr["candidates"].items() if r.get("status") == "ok" and r.get("time_us")}
        streamk = [(us, n) for n, us in times.items() if n in params]
        lib = next(((us, n) for n, us in times.items() if n.startswith("library:")), None)
        if not streamk or lib is None or not pr.get("best_baseline_us"):
            continue
        us, name = min(streamk)
        p = params[name]
        twin_us = times.get(wgmma.name(wgmma.whole_tile(p)))
        problem = Problem.from_dict(pr["problem"])
        out.append({"shape": problem.key, "streamk": name, "streamk_us": us, "twin_us": twin_us,
                    "expected_over_twin": estimate(p, problem) / estimate(wgmma.whole_tile(p), problem),
                    "library": lib[1], "library_us": lib[0], "best_baseline_us": pr["best_baseline_us"],
                    "best_baseline": pr.get("best_baseline")})
    return out


def table(results: dict) -> str:
    if not results.get("gpu_run"):
        return "compiled, not run: no GPU visible\n"
    rs = rows(results)
    lines = ["| shape | stream-K | µs | / twin (expected) | / library | library vs the strongest | stream-K vs the strongest |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rs:
        over_twin = f"{r['streamk_us'] / r['twin_us']:.3f}" if r["twin_us"] else "-"
        lines.append(f"| {r['shape']} | {r['streamk']} | {r['streamk_us']:.1f} | {over_twin} ({r['expected_over_twin']:.3f}) | "
                     f"{r['streamk_us'] / r['library_us']:.3f} | {r['best_baseline_us'] / r['library_us']:.3f} | "
                     f"{r['best_baseline_us'] / r['streamk_us']:.3f} |")
    if rs:
        served = [min(r["streamk_us"], r["library_us"]) for r in rs]
        lines += ["", f"{len(rs)} shapes: stream-K / library {geomean([r['streamk_us'] / r['library_us'] for r in rs]):.3f} "
                  f"in geomean, faster by more than {MARGIN - 1:.0%} on "
                  f"{sum(r['streamk_us'] * MARGIN < r['library_us'] for r in rs)}; the library "
                  f"{geomean([r['best_baseline_us'] / r['library_us'] for r in rs]):.3f}x the strongest baseline, the faster "
                  f"of the two {geomean([r['best_baseline_us'] / s for r, s in zip(rs, served)]):.3f}x; stream-K / twin "
                  f"{geomean([r['streamk_us'] / r['twin_us'] for r in rs if r['twin_us']]):.3f} (expected "
                  f"{geomean([r['expected_over_twin'] for r in rs]):.3f})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("library", help="a tuned library folder (table.json): its choice is timed on every shape")
    ap.add_argument("--grid", required=True)
    ap.add_argument("--out", required=True, help="results JSON (the table goes beside it as .md)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    problems = load_grid(args.grid)
    named, wanted = candidates(problems, Library(args.library))
    results = run_bench(named, problems, EvalOptions(reps=args.reps), select=lambda p, n: n in wanted[p.key])
    results["grid"], results["library"] = args.grid, args.library
    out = Path(args.out)
    out.write_text(json.dumps(results, indent=1, default=str))
    md = table(results)
    out.with_suffix(".md").write_text(md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How much of a full search the cost model's shortlist keeps, judged on a search's own measurements.

`bash scripts/gpu_search_headroom.sh` tunes shapes no tune saw with every tile shape of every family,
and times a library's choice for each shape in the same run. Per shape and k, the best of the first k
kernels that `hgemm tune --rank-by LIBRARY --top k` would time (hgemm.tune.cost_shortlist) is read
off those measurements and set against the library's choice and the run's strongest baseline: what a
tune of k kernels a shape (or a best of k written by a sampler that follows the ranking) gains over
the library's static choice, without timing anything again.

    python -m hgemm.shortlist_eval benchmarks/search_headroom/tune --rank-by LIBRARY --out FILE.json
"""

from __future__ import annotations

import argparse
import sys

from .files import write_report
from .library import Library, tune_results
from .problem import Problem
from .summary import BESIDE, geomean
from .tune import cost_shortlist

KS = (1, 2, 4, 8, 16)
MARGIN = 1.02  # faster than the library's choice by more than this: the library stage's own_margin


def evaluate(search: dict, library: Library, ks=KS, margin: float = MARGIN) -> dict:
    """search: a tune's results (bench.json) that timed a library's choice `beside:` on every shape.
    Per k over the shapes where that choice was timed: the best of the cost shortlist's first k
    (those the search verified and timed) against the choice and against the strongest baseline."""
    rows = []
    for pr in search["problems"]:
        p = Problem.from_dict(pr["problem"])
        timed = {n: r["time_us"] for n, r in pr["candidates"].items() if r.get("status") == "ok" and r.get("time_us")}
        current = [t for n, t in timed.items() if n.startswith(BESIDE)]
        picks = [n for n, _ in cost_shortlist(p, library, max(ks)) if n in timed]
        if not current or not picks or not pr.get("best_baseline_us"):
            continue
        searched = [t for n, t in timed.items() if not n.startswith(BESIDE)]
        rows.append({"shape": p.key, "current_us": current[0], "best_baseline_us": pr["best_baseline_us"],
                     "searched_best_us": min(searched), "shortlist": picks,
                     "best_of_us": {k: min(timed[n] for n in picks[:k]) for k in ks}})
    summary = {}
    for k in list(ks) + ["all"]:
        best = [r["best_of_us"][k] if k != "all" else r["searched_best_us"] for r in rows]
        # a library that times the choice and the first k at a shape's first call (hgemm.autotune) serves
        # the faster of the two; what the whole search still finds beyond it is a sampler's room then
        served = [min(b, r["current_us"]) for b, r in zip(best, rows)]
        summary[k] = {"time_over_current": geomean([b / r["current_us"] for b, r in zip(best, rows)]),
                      "faster_than_current": sum(b * margin < r["current_us"] for b, r in zip(best, rows)),
                      "speedup_vs_best": geomean([r["best_baseline_us"] / b for b, r in zip(best, rows)]),
                      "search_faster_than_served": sum(r["searched_best_us"] * margin < s for s, r in zip(served, rows))}
    return {"shapes": len(rows), "margin": margin,
            "current_speedup_vs_best": geomean([r["best_baseline_us"] / r["current_us"] for r in rows]),
            "summary": summary, "rows": rows}


def markdown(result: dict) -> str:
    lines = ["# The cost model's shortlist against the library's choice, on a full search's measurements", "",
             f"{result['shapes']} shapes where the search timed the library's choice. Best of k: the fastest of "
             "the first k kernels the cost model ranks (`hgemm tune --rank-by LIBRARY --top k`); *all*: the "
             "search's fastest. The library's choice: "
             f"{result['current_speedup_vs_best']:.3f}x the strongest baseline in geomean.", "",
             "| k | time over the library's choice | shapes faster than it by more than "
             f"{result['margin'] - 1:.0%} | speedup vs the strongest baseline | shapes where the whole search "
             "beats the faster of the choice and the best of k by as much |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {s['time_over_current']:.3f} | {s['faster_than_current']} | {s['speedup_vs_best']:.3f} | "
              f"{s['search_faster_than_served']} |" for k, s in result["summary"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.shortlist_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("search", help="a tune folder that timed every variant beside a library (bench.json[.gz])")
    ap.add_argument("--rank-by", dest="rank_by", required=True, help="the library folder whose cost model ranks")
    ap.add_argument("--out", required=True, help="results JSON (a Markdown summary goes beside it)")
    args = ap.parse_args(argv)
    try:
        search = tune_results(args.search)
        library = Library(args.rank_by)
    except (OSError, KeyError, ValueError) as e:  # ValueError: bad JSON, a file that is not gzip
        print(f"error: {e}", file=sys.stderr)
        return 2
    if search is None:
        print(f"error: {args.search}: no bench.json or bench.json.gz", file=sys.stderr)
        return 2
    result = evaluate(search, library) | {"search": args.search, "rank_by": args.rank_by}
    write_report(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The odd-row bench as a table: per shape and kernel, its time (µs) and ratio to the strongest baseline
of this run, beside the same kernel's ratio on the same shape in the committed first-call search runs
(benchmarks/autotune/*.json.gz and benchmarks/autotune/sample_heldout/*.json.gz, where C's rows that
start 2 bytes off were stored element by element; an H100, their gpu.txt): a reference, not a pair.

Usage: python benchmarks/odd_rows/table.py BENCH_JSON
"""

import gzip
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = [HERE.parent / "autotune" / "heldout.json.gz", HERE.parent / "autotune" / "sample_heldout" / "heldout.json.gz"]


def key(p: dict) -> tuple:
    return p["M"], p["N"], p["K"], p["batch"], p["layout"]


before: dict[tuple, dict[str, float]] = {}
for run in RUNS:
    for pr in json.load(gzip.open(run))["problems"]:
        for name, c in pr["candidates"].items():
            if c.get("time_us"):
                before.setdefault(key(pr["problem"]), {})[name.split(":")[-1]] = pr["best_baseline_us"] / c["time_us"]

with open(sys.argv[1]) as f:
    now = json.load(f)
print("| shape | kernel | µs | strongest baseline | ratio | ratio, search runs |")
print("|---|---|---:|---|---:|---:|")
pairs = []
for pr in now["problems"]:
    p = pr["problem"]
    for name, c in sorted(pr["candidates"].items()):
        if not c.get("time_us"):
            continue
        ratio = pr["best_baseline_us"] / c["time_us"]
        old = before.get(key(p), {}).get(name)
        if old:
            pairs.append((ratio, old))
        print(f"| b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']} | {name} | {c['time_us']:.2f} | "
              f"{pr['best_baseline']} {pr['best_baseline_us']:.2f} | {ratio:.3f} | {f'{old:.3f}' if old else '-'} |")
if pairs:
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"\nover the {len(pairs)} kernel-shape pairs the search runs timed: {gm([r for r, _ in pairs]):.3f} here, "
          f"{gm([o for _, o in pairs]):.3f} there")

"""The short-K loads bench as a table: per shape, the short-K variant that benchmarks/small_k/heldout.json.gz
timed there (the family's held-out run, its loads converted as they arrived; the card that ran it is in
benchmarks/small_k/gpu.txt), its time in this run and its ratio to this run's strongest baseline beside
the ratio it had in that one; and this run's fastest short-K variant.

Usage: python benchmarks/small_k_loads/table.py BENCH_JSON
"""

import gzip
import json
import math
import sys
from pathlib import Path

BEFORE = Path(__file__).resolve().parent.parent / "small_k" / "heldout.json.gz"


def key(p: dict) -> tuple:
    return p["M"], p["N"], p["K"], p["batch"], p["layout"]


def best_small_k(pr: dict) -> tuple[str, float] | None:
    """The fastest short-K kernel of a bench problem: (name without its library prefix, µs)."""
    times = [(n.split(":")[-1], c["time_us"]) for n, c in pr["candidates"].items()
             if n.split(":")[-1].startswith("small_k_k") and c.get("time_us")]
    return min(times, key=lambda x: x[1]) if times else None


with open(sys.argv[1]) as f:
    now = json.load(f)
before = {key(pr["problem"]): pr for pr in json.load(gzip.open(BEFORE))["problems"]}
print("| shape | kernel (held-out run's) | µs | strongest baseline | ratio | ratio, held-out run | fastest short-K here (µs) |")
print("|---|---|---:|---|---:|---:|---|")
ratios, olds = [], []
for pr in now["problems"]:
    p, fastest = pr["problem"], best_small_k(pr)
    old = before.get(key(p))
    old_best = best_small_k(old) if old else None
    if fastest is None or old_best is None:
        continue
    same = next((c["time_us"] for n, c in pr["candidates"].items() if n.split(":")[-1] == old_best[0] and c.get("time_us")), None)
    if same is None:
        continue
    ratio, old_ratio = pr["best_baseline_us"] / same, old["best_baseline_us"] / old_best[1]
    ratios.append(ratio)
    olds.append(old_ratio)
    print(f"| b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']} | {old_best[0]} | {same:.2f} | "
          f"{pr['best_baseline']} {pr['best_baseline_us']:.2f} | {ratio:.3f} | {old_ratio:.3f} | {fastest[0]} ({fastest[1]:.2f}) |")
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"\ngeomean over {len(ratios)} shapes: {gm(ratios):.3f} here, {gm(olds):.3f} in the held-out run")

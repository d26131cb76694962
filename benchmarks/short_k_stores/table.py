"""The short-K stores bench as a table: per shape, the strongest baseline of the run and each kernel's
time (µs), ratio to it and the rate it writes C at (GB/s), fastest first.

Usage: python benchmarks/short_k_stores/table.py BENCH_JSON   (may be gzipped)
"""

import json
import sys

from hgemm.files import read_user_text

run = json.loads(read_user_text(sys.argv[1], "bench results file"))
print("| shape | kernel | µs | ratio to the strongest baseline | C written, GB/s |")
print("|---|---|---:|---:|---:|")
for pr in run["problems"]:
    p = pr["problem"]
    shape = f"{p['M']}x{p['N']}x{p['K']} {p['layout']}"
    c_bytes = 2 * p["M"] * p["N"] * p["batch"]
    best = pr["best_baseline_us"]
    print(f"| {shape} | strongest: {pr['best_baseline']} | {best:.1f} | 1.000 | {c_bytes / best / 1e3:.0f} |")
    for us, name in sorted((c["time_us"], n) for n, c in pr["candidates"].items() if c.get("time_us")):
        print(f"| {shape} | {name} | {us:.1f} | {best / us:.3f} | {c_bytes / us / 1e3:.0f} |")
    failed = {n: c["status"] for n, c in pr["candidates"].items() if c.get("status") not in ("ok", None)}
    if failed:
        print(f"| {shape} | not timed: {failed} | | | |")

"""The staged-ways bench as a table: per shape, the strongest baseline of the run and each kernel's time
(µs) and ratio to it, fastest first.

Usage: python benchmarks/staged_ways/table.py BENCH_JSON   (may be gzipped)
"""

import json
import sys

from hgemm.files import read_user_text

run = json.loads(read_user_text(sys.argv[1], "bench results file"))
print("| shape | kernel | µs | ratio to the strongest baseline |")
print("|---|---|---:|---:|")
for pr in run["problems"]:
    p = pr["problem"]
    shape = f"{p['M']}x{p['N']}x{p['K']} {p['layout']}"
    print(f"| {shape} | strongest: {pr['best_baseline']} | {pr['best_baseline_us']:.1f} | 1.000 |")
    timed = sorted((c["time_us"], name) for name, c in pr["candidates"].items() if c.get("time_us"))
    for us, name in timed:
        print(f"| {shape} | {name} | {us:.1f} | {pr['best_baseline_us'] / us:.3f} |")
    # `unsupported`: a tile without staging on rows TMA refuses, expected on every misaligned shape
    failed = {name: c["status"] for name, c in pr["candidates"].items()
              if c.get("status") not in ("ok", "unsupported", None)}
    if failed:
        print(f"| {shape} | not timed: {failed} | | |")

"""The small-tile bench as a table: per shape, the fastest kernel of the 32-row tiles and of today's
tiles (µs, with the kernel), their ratio, and the strongest baseline.

Usage: python benchmarks/small_tiles/table.py BENCH_JSON
"""

import json
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
print("| shape | 32-row tiles | today's tiles | gain | strongest baseline |")
print("|---|---|---|---:|---|")
for pr in bench["problems"]:
    p = pr["problem"]
    best = {}
    for name, c in pr["candidates"].items():
        if c.get("time_us"):
            side = "small" if name.startswith("mma_sync_32x") else "today"
            if c["time_us"] < best.get(side, ("", float("inf")))[1]:
                best[side] = (name, c["time_us"])
    s, t = best.get("small"), best.get("today")
    gain = f"{t[1] / s[1]:.2f}x" if s and t else "-"
    cell = lambda b: f"{b[1]:.1f} `{b[0]}`" if b else "-"
    print(f"| {p['M']}x{p['N']}x{p['K']} {p['layout']} | {cell(s)} | {cell(t)} | {gain} | "
          f"{pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

"""The last-tile-parked bench as a table: per shape and tile, the time (µs) of the parked epilogue at its
ring (`_es`), of the register epilogue and of `epilogue: last` (`_el`) at the deeper ring both fit, the
last form's speed against each (> 1: faster), and the strongest baseline.

Usage: python benchmarks/last_parked/table.py BENCH_JSON
"""

import json
import re
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
print("| shape | tile | parked (ring) | registers (ring) | last parked (ring) | last / parked | last / registers | strongest baseline |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for pr in bench["problems"]:
    p, cells = pr["problem"], {}
    for name, c in pr["candidates"].items():
        m = re.fullmatch(r"wgmma_(\d+x\d+)x64_c(\d)_s(\d+)_g8(_es|_el)?", name)
        if m and c.get("time_us"):
            tile = f"{m.group(1)}, {m.group(2)} consumer{'s' * (m.group(2) != '1')}"
            cells[(tile, {"_es": "smem", "_el": "last", None: "registers"}[m.group(4)])] = (c["time_us"], m.group(3))
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    for tile in sorted({t for t, _ in cells}):
        es, reg, last = (cells.get((tile, f)) for f in ("smem", "registers", "last"))
        cell = lambda v: f"{v[0]:.1f} ({v[1]})" if v else "-"
        ratio = lambda v: f"{v[0] / last[0]:.2f}x" if v and last else "-"
        print(f"| {shape} | {tile} | {cell(es)} | {cell(reg)} | {cell(last)} | {ratio(es)} | {ratio(reg)} | "
              f"{pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

"""The multicast bench as a table: per shape and tile, the best time over its ring depths and epilogues
(µs) plain, in clusters sharing B (`_cl2`) and in clusters sharing A (`_cl2a`), each cluster's speed
against the plain tile (> 1: faster), and the strongest baseline.

Usage: python benchmarks/multicast/table.py BENCH_JSON
"""

import json
import re
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
FORMS = ("plain", "cl2", "cl2a")
print("| shape | tile | plain | sharing B | sharing A | B / plain | A / plain | strongest baseline |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for pr in bench["problems"]:
    p, best = pr["problem"], {}
    for name, c in pr["candidates"].items():
        m = re.fullmatch(r"wgmma_(\d+x\d+)x64_c(\d)_s\d+_g8(_cl2a?)?(_es)?", name)
        if m and c.get("time_us"):
            key = (f"{m.group(1)}, {m.group(2)} consumer{'s' * (m.group(2) != '1')}", (m.group(3) or "_plain")[1:])
            best[key] = min(best.get(key, float("inf")), c["time_us"])
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    for tile in sorted({t for t, _ in best}):
        t = [best.get((tile, f)) for f in FORMS]
        cell = lambda v: f"{v:.1f}" if v else "-"
        ratio = lambda v: f"{t[0] / v:.2f}x" if t[0] and v else "-"
        print(f"| {shape} | {tile} | {cell(t[0])} | {cell(t[1])} | {cell(t[2])} | {ratio(t[1])} | {ratio(t[2])} | "
              f"{pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

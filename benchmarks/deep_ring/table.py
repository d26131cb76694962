"""The deep-ring bench as a table: per shape, each tile and form's time at each ring depth (µs), the
ratio of its best deeper ring to 6 stages, and the strongest baseline.

Usage: python benchmarks/deep_ring/table.py BENCH_JSON
"""

import json
import re
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
for pr in bench["problems"]:
    p, rows = pr["problem"], {}
    for name, c in pr["candidates"].items():
        m = re.fullmatch(r"wgmma_(\d+x\d+)x64_c1_s(\d+)_g8_(\w+)", name)
        if m and c.get("time_us"):
            rows.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = c["time_us"]
    cells = []
    for (tile, form), t in sorted(rows.items()):
        deeper = [v for s, v in t.items() if s > 6]
        gain = f" ({t[6] / min(deeper):.2f}x)" if 6 in t and deeper else ""
        cells.append(f"{tile} {form} " + "/".join(f"s{s} {v:.1f}" for s, v in sorted(t.items())) + gain)
    print(f"{p['M']}x{p['N']}x{p['K']} | " + " | ".join(cells) + f" | {pr['best_baseline']} {pr['best_baseline_us']:.1f}")

"""The multicast bench as a table: per shape, each tile's best time over its ring depths and epilogues
(µs) plain, in clusters sharing B (`_cl2`) and in clusters sharing A (`_cl2a`), each cluster's ratio to
the plain tile, and the strongest baseline.

Usage: python benchmarks/multicast/table.py BENCH_JSON
"""

import json
import re
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
FORMS = ("plain", "cl2", "cl2a")
print("| shape | " + " | ".join(f"{'tile':>10} {' / '.join(FORMS)}" for _ in range(1)) + " | strongest baseline |")
for pr in bench["problems"]:
    p, best = pr["problem"], {}
    for name, c in pr["candidates"].items():
        m = re.fullmatch(r"wgmma_(\d+x\d+)x64_(c\d)_s\d+_g8(_cl2a?)?(_es)?", name)
        if m and c.get("time_us"):
            key = (f"{m.group(1)}_{m.group(2)}", (m.group(3) or "_plain")[1:])
            best[key] = min(best.get(key, float("inf")), c["time_us"])
    cells = []
    for tile in sorted({t for t, _ in best}):
        t = [best.get((tile, f)) for f in FORMS]
        gains = " ".join(f"{t[0] / v:.2f}x" for v in t[1:] if t[0] and v)
        cells.append(f"{tile} " + "/".join(f"{v:.1f}" if v else "-" for v in t) + f" ({gains})")
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    print(f"| {shape} | " + " | ".join(cells) + f" | {pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

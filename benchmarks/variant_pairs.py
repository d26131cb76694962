"""Print a bench JSON as pairs of variants that differ in one option, per shape: for each tile, the best
time over ring depths without the option and with it (benchmarks/cluster/: `_cl2`, 2-CTA clusters;
benchmarks/epilogue/: `_es`, the epilogue through shared memory).

Usage: python benchmarks/variant_pairs.py BENCH_JSON MARKER
"""

import json
import re
import sys

with open(sys.argv[1]) as f:
    bench = json.load(f)
marker = sys.argv[2]
for pr in bench["problems"]:
    p, best = pr["problem"], {}
    for name, c in pr["candidates"].items():
        if not c.get("time_us"):
            continue
        tile = re.sub(r"_s\d+", "", name.replace(marker, "")).replace("wgmma_", "").replace("x64_c", "_c").replace("_g8", "")
        side = marker in name
        key = (tile, side)
        best[key] = min(best.get(key, float("inf")), c["time_us"])
    cells = []
    for tile in sorted({t for t, _ in best}):
        without, with_ = best.get((tile, False)), best.get((tile, True))
        ratio = f" ({without / with_:4.2f}x)" if without and with_ else ""
        cells.append(f"{tile} {without or 0:7.1f}/{with_ or 0:7.1f}{ratio}")
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    print(shape.ljust(24), " ".join(cells), f"| {pr['best_baseline']} {pr['best_baseline_us']:.1f}")

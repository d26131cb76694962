"""The one-consumer stores bench as a table: per shape and tile, the parked epilogue's time and the
tensor stores' (µs), the first over the second (> 1: the tensor stores faster), and the strongest baseline.

Usage: python benchmarks/one_consumer_stores/table.py BENCH_JSON   (may be gzipped)
"""

import json
import re
import sys

from hgemm.files import read_user_text

run = json.loads(read_user_text(sys.argv[1], "bench results file"))
print("| shape | tile | parked | tensor stores | parked / tensor | strongest baseline |")
print("|---|---|---:|---:|---:|---|")
for pr in run["problems"]:
    p, times = pr["problem"], {}
    for name, c in pr["candidates"].items():
        m = re.fullmatch(r"wgmma_(.+)_(es|ebt)", name)
        if m and c.get("time_us"):
            times.setdefault(m.group(1), {})[m.group(2)] = c["time_us"]
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    for tile, t in sorted(times.items()):
        es, ebt = t.get("es"), t.get("ebt")
        ratio = f"{es / ebt:.3f}" if es and ebt else "-"
        print(f"| {shape} | {tile} | {es or 0:.1f} | {ebt or 0:.1f} | {ratio} | "
              f"{pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

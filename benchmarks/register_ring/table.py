"""The register ring's A/B as a table: per shape and kernel, its time without the ring (other.json, the
headers of .ab/) and with it (working.json), the ratio, and the strongest baseline of the working run (µs).

Usage: python benchmarks/register_ring/table.py WORKING_JSON OTHER_JSON   (either may be gzipped)
"""

import json
import sys

from hgemm.files import read_user_text
from hgemm.summary import geomean


def times(path: str) -> tuple[dict, dict]:
    run = json.loads(read_user_text(path, "bench results file"))
    kernels, best = {}, {}
    for pr in run["problems"]:
        p = pr["problem"]
        shape = f"{p['M']}x{p['N']}x{p['K']} {p['layout']}"
        best[shape] = (pr["best_baseline"], pr["best_baseline_us"])
        for name, c in pr["candidates"].items():
            if c.get("status") == "ok":
                kernels[(shape, name)] = c["time_us"]
    return kernels, best


working, best = times(sys.argv[1])
other, _ = times(sys.argv[2])
print("| shape | kernel | without µs | with the ring µs | without / with | strongest baseline µs | with vs it |")
print("|---|---|---:|---:|---:|---:|---:|")
ratios = []
for (shape, name), after in sorted(working.items()):
    before = other.get((shape, name))
    if before is None:
        continue
    ratios.append(before / after)
    base, base_us = best[shape]
    print(f"| {shape} | {name} | {before:.2f} | {after:.2f} | {before / after:.3f} | {base} {base_us:.2f} | "
          f"{base_us / after:.3f} |")
print(f"\n{len(ratios)} kernel-shape pairs, without / with the ring: geomean {geomean(ratios):.3f}, "
      f"range {min(ratios):.3f}-{max(ratios):.3f}")

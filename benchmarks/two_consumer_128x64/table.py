"""The two-consumer 128 x 64 tile against the one-consumer 128 x 64 and 64 x 64 tiles as a table: per
shape, the fastest time (µs) of each (named; any ring, epilogue or CTAs an SM), the second over the first
(> 1: two consumers faster), and the strongest baseline. Reads this folder's bench or a tune's
bench.json.gz (benchmarks/default_search/tune/), which times every configuration.

Usage: python benchmarks/two_consumer_128x64/table.py BENCH_JSON   (may be gzipped)
"""

import json
import sys

from hgemm.files import read_user_text

run = json.loads(read_user_text(sys.argv[1], "bench results file"))
print("| shape | two consumers | µs | one consumer | µs | one / two | strongest baseline |")
print("|---|---|---:|---|---:|---:|---|")
for pr in run["problems"]:
    p = pr["problem"]
    timed = {name: c["time_us"] for name, c in pr["candidates"].items() if c.get("time_us")}
    two = {n: t for n, t in timed.items() if n.startswith("wgmma_128x64x64_c2_")}
    one = {n: t for n, t in timed.items() if n.startswith(("wgmma_128x64x64_c1_", "wgmma_64x64x64_c1_"))}
    if not two or not one:
        continue
    t2, t1 = min(two, key=two.get), min(one, key=one.get)
    print(f"| b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']} | {t2.removeprefix('wgmma_')} | {two[t2]:.1f} | "
          f"{t1.removeprefix('wgmma_')} | {one[t1]:.1f} | {one[t1] / two[t2]:.3f} | "
          f"{pr['best_baseline']} {pr['best_baseline_us']:.1f} |")

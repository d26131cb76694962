"""The bulk-copy epilogue bench as tables: per shape and tile, the time (µs) of the parked epilogue stored
by the producer's warps (`_es`) and of the bulk-copy one (`_eb`), at the same ring, the second's speed
against the first (> 1: faster), and the strongest baseline; then, over 2048 x 2048 x K, each kernel's
and baseline's least-squares line time = a + b * K: `a` what a launch costs besides its k steps (pipeline
fill, the last tile's epilogue, the launch), `b` what 1024 more of K cost.

Usage: python benchmarks/bulk_store/table.py BENCH_JSON
"""

import json
import re
import sys

NAME = re.compile(r"wgmma_(\d+x\d+)x64_c(\d)_s(\d+)_g8(_x2)?_(es|eb)")


def tile_of(m: re.Match) -> str:
    return f"{m.group(1)}, {m.group(2)} consumer{'s' * (m.group(2) != '1')}{', 2 CTAs an SM' if m.group(4) else ''}"


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    n = len(points)
    mk, mt = sum(k for k, _ in points) / n, sum(t for _, t in points) / n
    b = sum((k - mk) * (t - mt) for k, t in points) / sum((k - mk) ** 2 for k, _ in points)
    return mt - b * mk, b


with open(sys.argv[1]) as f:
    bench = json.load(f)
print("| shape | tile | parked, storer warps (ring) | bulk copies (ring) | bulk / parked | strongest baseline |")
print("|---|---|---:|---:|---:|---|")
sweep: dict[str, list[tuple[int, float]]] = {}
for pr in bench["problems"]:
    p, cells = pr["problem"], {}
    for name, c in pr["candidates"].items():
        if not c.get("time_us"):
            continue
        m = NAME.fullmatch(name)
        if m:
            cells[(tile_of(m), m.group(5))] = (c["time_us"], m.group(3))
        if (p["M"], p["N"], p["batch"], p["layout"]) == (2048, 2048, 1, "NN"):
            sweep.setdefault(name, []).append((p["K"], c["time_us"]))
    if (p["M"], p["N"], p["batch"], p["layout"]) == (2048, 2048, 1, "NN"):
        for name, b in pr["baselines"].items():
            if b and b.get("timing"):
                sweep.setdefault(name, []).append((p["K"], b["timing"]["median_us"]))
    shape = f"b{p['batch']} {p['M']}x{p['N']}x{p['K']} {p['layout']}"
    for tile in sorted({t for t, _ in cells}):
        es, eb = cells.get((tile, "es")), cells.get((tile, "eb"))
        cell = lambda v: f"{v[0]:.1f} ({v[1]})" if v else "-"
        ratio = f"{es[0] / eb[0]:.3f}x" if es and eb else "-"
        print(f"| {shape} | {tile} | {cell(es)} | {cell(eb)} | {ratio} | {pr['best_baseline']} {pr['best_baseline_us']:.1f} |")
print()
print("| 2048 x 2048 x K, NN | K timed | a: µs besides the k steps | b: µs per 1024 of K |")
print("|---|---|---:|---:|")
for name, pts in sorted(sweep.items()):
    if len(pts) >= 3:
        a, b = fit(pts)
        print(f"| {name} | {', '.join(str(k) for k, _ in sorted(pts))} | {a:.2f} | {b * 1024:.2f} |")

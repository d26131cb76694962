"""How well hgemm.tune.estimate tells a stream-K kernel from its whole-tile twin, fitted and checked on
the pairs benchmarks/streamk/ timed (streamk.json.gz, streamk_staged.json.gz; an H100).

The estimate counts the busiest CTA's k tiles. A split tile's owner also reads and clears (ways - 1)
slots of fp32 sums on its own SM after its mainloop (hgemm.cost.streamk_owner_bytes), a serial tail
the k tiles do not show. This fits the tail's weight (hgemm.tune.STREAMK_OWNER_WORK_PER_BYTE) and a
fixed cost every kernel pays (launch, ring fill, epilogue; it cancels out of any ranking) to the
measured stream-K / twin time ratios, and prints the fit's error, left-one-shape-out, and how often the
estimate tells which of the two is faster.

    python benchmarks/streamk/fit_estimate.py
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from hgemm.cost import streamk_owner_bytes
from hgemm.problem import Problem
from hgemm.tune import STREAMK_OWNER_WORK_PER_BYTE, estimate
from kernels_corpus.families import wgmma

HERE = Path(__file__).parent
RUNS = (HERE / "streamk.json.gz", HERE / "streamk_staged.json.gz")


def pairs() -> list[dict]:
    """Per timed stream-K kernel: its estimate without the tail, its twin's, the tail's bytes, the
    measured time ratio and the shape."""
    params = {wgmma.name(v): v for v in wgmma.variants() if v.get("streamk")}
    out = []
    for run in RUNS:
        for pr in json.loads(gzip.decompress(run.read_bytes()))["problems"]:
            p = pr["problem"]
            problem = Problem(p["M"], p["N"], p["K"], p["batch"], p["layout"])
            us = {n: (r.get("timing") or {}).get("median_us") for n, r in pr["candidates"].items()}
            for name, v in params.items():
                whole = wgmma.whole_tile(v)
                if not us.get(name) or not us.get(wgmma.name(whole)):
                    continue
                tiles = -(-problem.M // v["bm"]) * -(-problem.N // v["bn"]) * problem.batch
                tail = streamk_owner_bytes(v, tiles, -(-problem.K // 64), v["bm"] * v["bn"])
                out.append({"work": estimate(v, problem) - STREAMK_OWNER_WORK_PER_BYTE * tail,
                            "twin": estimate(whole, problem), "tail": tail,
                            "ratio": us[name] / us[wgmma.name(whole)], "shape": problem.key})
    return out


def fit(rows: list[dict]) -> tuple[float, float]:
    """(fixed cost, tail weight) minimising the squared log error of the predicted ratios."""
    def loss(x):
        fixed, weight = np.exp(x)
        return sum((math.log((r["work"] + fixed + weight * r["tail"]) / (r["twin"] + fixed)) - math.log(r["ratio"])) ** 2
                   for r in rows) / len(rows)
    return tuple(np.exp(minimize(loss, [math.log(1e8), math.log(30.0)], method="Nelder-Mead").x))


def main() -> None:
    rows = pairs()
    fixed, weight = fit(rows)
    log_err = lambda r, f, w: math.log((r["work"] + f + w * r["tail"]) / (r["twin"] + f)) - math.log(r["ratio"])
    rms = lambda errs: math.sqrt(sum(e * e for e in errs) / len(errs))
    held = []
    for shape in sorted({r["shape"] for r in rows}):
        f, w = fit([r for r in rows if r["shape"] != shape])
        held += [log_err(r, f, w) for r in rows if r["shape"] == shape]
    faster = lambda w: sum((r["work"] + w * r["tail"] < r["twin"]) == (r["ratio"] < 1) for r in rows) / len(rows)
    print(f"{len(rows)} stream-K / twin pairs on {len({r['shape'] for r in rows})} shapes")
    print(f"fitted: tail weight {weight:.1f} a byte (in use: {STREAMK_OWNER_WORK_PER_BYTE}), "
          f"fixed cost {fixed / (128 * 256 * 64):.1f} k tiles of 128 x 256")
    print(f"rms log error of the ratio: {rms([log_err(r, 0.0, 0.0) for r in rows]):.3f} without either, "
          f"{rms([log_err(r, fixed, weight) for r in rows]):.3f} fitted, {rms(held):.3f} each shape left out")
    print(f"which of the two is faster, told right: {faster(0.0):.0%} without the tail, "
          f"{faster(STREAMK_OWNER_WORK_PER_BYTE):.0%} with it")


if __name__ == "__main__":
    main()

"""Write the wgmma one-consumer tiles the library serves its slowest default-grid and held-out shapes
with, each with the parked epilogue (the family's) and with the TMA tensor stores of C (`_ebt`), at
the same ring, into a folder (default results/one_consumer_stores/kernels);
`hgemm bench --kernels results/one_consumer_stores/kernels` times them.

Usage: python benchmarks/one_consumer_stores/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

TILES = [dict(bm=128, bn=64, stages=6), dict(bm=128, bn=128, stages=5), dict(bm=64, bn=64, stages=6),
         dict(bm=64, bn=64, stages=6, ctas_per_sm=2), dict(bm=64, bn=64, stages=5, ctas_per_sm=2),
         dict(bm=64, bn=128, stages=6), dict(bm=64, bn=256, stages=4)]


def variants() -> list[dict]:
    return [dict(t, consumers=1, group_m=8, epilogue=ep) for t in TILES for ep in ("smem", "bulk_tensor")]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/one_consumer_stores/kernels")
    print("\n".join(write_kernels(wgmma, variants(), out)))

"""Write the wgmma 128 x 64 tile with two consumer warpgroups (each 64 x 64) at its three deepest rings,
with the parked epilogue and with the TMA tensor stores of C, and beside them the one-consumer 128 x 64
tile and the two-CTA 64 x 64 tile the library serves these shapes with, into a folder (default
results/two_consumer_128x64/kernels); `hgemm bench --kernels results/two_consumer_128x64/kernels` times them.

Usage: python benchmarks/two_consumer_128x64/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

EPILOGUES = ("smem", "bulk_tensor")
TWO_CONSUMERS = [dict(bm=128, bn=64, consumers=2, stages=st) for st in (4, 5, 6)]
LIBRARY_TILES = [dict(bm=128, bn=64, consumers=1, stages=6), dict(bm=64, bn=64, consumers=1, stages=6, ctas_per_sm=2)]


def variants() -> list[dict]:
    return [dict(t, group_m=8, epilogue=ep) for t in TWO_CONSUMERS + LIBRARY_TILES for ep in EPILOGUES]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/two_consumer_128x64/kernels")
    print("\n".join(write_kernels(wgmma, variants(), out)))

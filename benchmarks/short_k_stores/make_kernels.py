"""Write the wgmma kernels that serve a short K (one k tile) and a large output, where a tile is a short
mainloop and a long store of C: the two-consumer tiles with each epilogue (bulk copies, parked for the
producer's warps, from registers) and two tile orders (GROUP_M 8, the family's, and 1: the tiles of a
row of tiles side by side), into a folder (default results/short_k_stores/kernels);
`hgemm bench --kernels results/short_k_stores/kernels` times them.

Usage: python benchmarks/short_k_stores/make_kernels.py [OUT_DIR]
"""

import itertools
import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

TILES = [dict(bm=128, bn=256, consumers=2, stages=3), dict(bm=256, bn=128, consumers=2, stages=3),
         dict(bm=128, bn=128, consumers=2, stages=4)]
EPILOGUES = ({"epilogue": "bulk"}, {"epilogue": "smem"}, {})   # {}: from registers
GROUPS = (8, 1)


def variants() -> list[dict]:
    return [dict(tile, group_m=g, **ep) for tile, ep, g in itertools.product(TILES, EPILOGUES, GROUPS)]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/short_k_stores/kernels")
    print("\n".join(write_kernels(wgmma, variants(), out)))

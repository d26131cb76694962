"""Write the wgmma kernels that serve a short K (one k tile) and a large output, where a tile is a short
mainloop and a long store of C: the two-consumer tiles with each epilogue (bulk copies, parked for the
producer's warps, from registers) and two tile orders (GROUP_M 8, the family's, and 1: the tiles of a
row of tiles side by side), and the bulk copies beside the TMA tensor stores of C (`_ebt`) on the four
tiles that write C fastest, into a folder (default results/short_k_stores/kernels);
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
# the bulk copies and the TMA tensor stores of C, side by side on the tiles that write C fastest
TENSOR_TILES = [dict(bm=128, bn=256, consumers=2, stages=3), dict(bm=128, bn=192, consumers=2, stages=4),
                dict(bm=256, bn=128, consumers=2, stages=3), dict(bm=128, bn=128, consumers=2, stages=4)]
GROUPS = (8, 1)


def variants() -> list[dict]:
    out = [dict(tile, group_m=g, **ep) for tile, ep, g in itertools.product(TILES, EPILOGUES, GROUPS)]
    out += [dict(tile, group_m=8, epilogue=ep) for tile in TENSOR_TILES for ep in ("bulk", "bulk_tensor")]
    return [p for i, p in enumerate(out) if p not in out[:i]]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/short_k_stores/kernels")
    print("\n".join(write_kernels(wgmma, variants(), out)))

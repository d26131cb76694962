"""Write the kernels of the small-tile experiment into a folder (default results/small_tiles/kernels): the
mma.sync family's template at 32-row tiles (32 x 32 and 32 x 64, k tiles of 32 and 64, four warps of
16 x 16 or 16 x 32), which the family does not list, beside its two tiles that serve small outputs
today (16 x 128 and 64 x 64), each at 3 and 4 stages and every split of K the family takes.
`hgemm bench --kernels results/small_tiles/kernels` times them.

Usage: python benchmarks/small_tiles/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import mma_sync, write_kernels

SMALL = [(32, 32, 64, 2, 2), (32, 64, 64, 2, 2), (32, 32, 32, 2, 2), (32, 64, 32, 2, 2)]
TODAY = [(16, 128, 64, 1, 4), (64, 64, 64, 2, 2)]


def variants(tiles=SMALL + TODAY) -> list[dict]:
    out = []
    for (bm, bn, bk, wm, wn) in tiles:
        for stages in (3, 4):
            for split in mma_sync.SPLIT_K:
                p = dict(bm=bm, bn=bn, bk=bk, warps_m=wm, warps_n=wn, min_blocks=4, stages=stages, split_k=split,
                         group_m=8, misaligned_loads="pair")
                if mma_sync._valid(p):
                    out.append(p)
    return out


if __name__ == "__main__":
    print("\n".join(write_kernels(mma_sync, variants(), Path(sys.argv[1] if len(sys.argv) > 1 else "results/small_tiles/kernels"))))

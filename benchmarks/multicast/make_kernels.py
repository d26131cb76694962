"""Write the kernels of the multicast experiment into a folder (default results/multicast/kernels): the
wgmma family's whole-tile kernels of the tiles that take a cluster, each at the two deepest rings shared
memory holds, with each epilogue the family gives the tile, plain, in 2-CTA clusters sharing B
(`_cl2`: vertically adjacent tiles) and in 2-CTA clusters sharing A (`_cl2a`: horizontally adjacent).
`hgemm bench --kernels results/multicast/kernels` times them.

Usage: python benchmarks/multicast/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

TILES = [(128, 64, 1), (128, 128, 1), (128, 128, 2), (256, 128, 2), (128, 256, 2)]
CLUSTERS = [{}, dict(cluster=2), dict(cluster=2, multicast="A")]


def variants(depths: int = 2) -> list[dict]:
    """Every tile of TILES at its `depths` deepest rings, each epilogue, each of CLUSTERS."""
    out = []
    for (bm, bn, c), form in ((t, f) for t in TILES for f in CLUSTERS):
        for p in wgmma._epilogues(dict(bm=bm, bn=bn, consumers=c, stages=3, group_m=8, **form)):
            out += wgmma._deepest(lambda st: dict(p, stages=st), depths)
    return out


if __name__ == "__main__":
    print("\n".join(write_kernels(wgmma, variants(), Path(sys.argv[1] if len(sys.argv) > 1 else "results/multicast/kernels"))))

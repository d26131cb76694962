"""Write the kernels of the bulk-copy epilogue experiment into a folder (default
results/bulk_store/kernels): each whole-tile wgmma tile, one CTA an SM and two where the family has
them, with the parked epilogue (`_es`: the producer warpgroup's warps 1-3 store the parked tile) and with
`epilogue: bulk` (`_eb`: each consumer warp parks its own rows and copies them out with cp.async.bulk),
both at the deepest ring that fits beside the parked buffer, so the two differ only in who stores it.
`hgemm bench --kernels results/bulk_store/kernels` times them.

Usage: python benchmarks/bulk_store/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

TILES = [(128, 256, 2), (256, 128, 2), (128, 192, 2), (128, 128, 2), (128, 128, 1), (128, 64, 1), (64, 256, 1),
         (64, 128, 1), (64, 64, 1)]
FORMS = ("smem", "bulk")


def variants() -> list[dict]:
    """Every tile of TILES, and of the family's two-CTA tiles at two CTAs an SM, in each of FORMS at the
    deepest ring the parked buffer leaves."""
    out = []
    for form in FORMS:
        for bm, bn, c in TILES:
            out += wgmma._deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, epilogue=form), 1)
        for bm, bn, c in wgmma.TWO_CTA_TILES:
            out += wgmma._deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, ctas_per_sm=2,
                                                  epilogue=form), 1)
    return out


if __name__ == "__main__":
    print("\n".join(write_kernels(wgmma, variants(), Path(sys.argv[1] if len(sys.argv) > 1 else "results/bulk_store/kernels"))))

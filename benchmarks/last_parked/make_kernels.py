"""Write the kernels of the last-tile-parked experiment into a folder (default
results/last_parked/kernels): each whole-tile wgmma tile in three forms, the parked epilogue (`_es`) at
the deepest ring that fits beside its parked buffer, and at the deepest ring without that buffer the
register epilogue and `epilogue: last` (`_el`: from registers, but a CTA's last tile parked in the ring
and stored by the producer warpgroup's idle warps). `hgemm bench --kernels results/last_parked/kernels`
times them.

Usage: python benchmarks/last_parked/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

TILES = [(128, 256, 2), (256, 128, 2), (128, 192, 2), (128, 128, 2), (128, 128, 1), (128, 64, 1), (64, 256, 1),
         (64, 128, 1), (64, 64, 1)]
FORMS = ("smem", "registers", "last")


def variants() -> list[dict]:
    """Every tile of TILES in each of FORMS, at the deepest ring the form fits."""
    out = []
    for (bm, bn, c), form in ((t, f) for t in TILES for f in FORMS):
        extra = {} if form == "registers" else {"epilogue": form}
        out += wgmma._deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, **extra), 1)
    return out


if __name__ == "__main__":
    print("\n".join(write_kernels(wgmma, variants(), Path(sys.argv[1] if len(sys.argv) > 1 else "results/last_parked/kernels"))))

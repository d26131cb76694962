"""Write the kernels of the deep-ring experiment into a folder (default results/deep_ring/kernels): the
wgmma family's split-K and stream-K kernels of the small tiles at the ring the family gives them (6
stages, the deepest of `STAGES`) and at deeper rings that shared memory still holds, named after the
family's variant with the ring depth in place of theirs (`_s8`, `_s12`). The template takes any depth;
the family's `_valid` stops at 6. `hgemm bench --kernels results/deep_ring/kernels` times them.

Usage: python benchmarks/deep_ring/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

# the forms: cluster split-K 4 and 8 ways, stream-K over at most 8 CTAs (the parked epilogue)
FORMS = [dict(split_k=4), dict(split_k=8), dict(streamk=wgmma.STREAMK_WAYS, epilogue="smem")]
TILES = [(64, 64), (128, 64), (64, 128)]
DEPTHS = (6, 8, 12)


def fits(p: dict) -> bool:
    """The family's shared-memory and tile checks but the ring's cap: `_valid` at 6 stages, and the
    deeper ring's dynamic and static shared memory within the 227 KB a CTA may have."""
    return wgmma._valid(dict(p, stages=6)) and wgmma._smem_bytes(p) + wgmma.STATIC_SMEM <= wgmma.SMEM_LIMIT


def variants() -> list[dict]:
    """Every tile and form at each depth in DEPTHS that shared memory holds."""
    return [p for bm, bn in TILES for form in FORMS for stages in DEPTHS
            if fits(p := dict(bm=bm, bn=bn, consumers=1, stages=stages, group_m=8, **form))]


if __name__ == "__main__":
    print("\n".join(write_kernels(wgmma, variants(), Path(sys.argv[1] if len(sys.argv) > 1 else "results/deep_ring/kernels"))))

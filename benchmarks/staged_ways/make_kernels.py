"""Write the wgmma kernels that split a few long-K output tiles over staged copies (the refused rows
copied into padded ones first, hgemm/staged_loader.cuh), cluster split-K at 2, 4 and 8 ways and stream-K
at 8, 16 and 32 ways, and the same tiles without staging for the aligned shapes beside them, into a
folder (default results/staged_ways/kernels); `hgemm bench --kernels results/staged_ways/kernels` times them.

Usage: python benchmarks/staged_ways/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

STAGED = {"loader": "staged", "stage": "AB"}
STREAMK = {"group_m": 8, "epilogue": "smem"}   # the stream-K variants' smem epilogue


def variants() -> list[dict]:
    tiles = [dict(bm=128, bn=64, consumers=1, stages=6), dict(bm=128, bn=128, consumers=1, stages=5)]
    out = []
    for tile in tiles:
        for loader in (STAGED, {}):
            out += [dict(tile, group_m=8, split_k=s, **loader) for s in (2, 4, 8)]
            out += [dict(tile, streamk=w, **STREAMK, **loader) for w in (8, 16, 32)]
    return out


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/staged_ways/kernels")
    print("\n".join(write_kernels(wgmma, variants(), out)))

"""Write the mma.sync kernels that the first-call search keeps on odd-N shapes of the held-out grids
(benchmarks/autotune/: 16 x 128 and 32 x 32 tiles, 3 and 4 stages, no split) into a folder (default
results/odd_rows/kernels); `hgemm bench --kernels results/odd_rows/kernels` times them.

Usage: python benchmarks/odd_rows/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import mma_sync, write_kernels

NAMES = ("mma_sync_16x128x64_w1x4_s3_g8_sk1_mp", "mma_sync_16x128x64_w1x4_s4_g8_sk1_mp",
         "mma_sync_32x32x64_w2x2_s3_g8_sk1_mp", "mma_sync_32x32x64_w2x2_s4_g8_sk1_mp")


def variants() -> list[dict]:
    by_name = {mma_sync.name(p): p for p in mma_sync.variants()}
    return [by_name[n] for n in NAMES]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/odd_rows/kernels")
    print("\n".join(write_kernels(mma_sync, variants(), out)))

"""Write every short-K variant (kernels_corpus/families/small_k.py) into a folder (default
results/small_k_loads/kernels); `hgemm bench --kernels results/small_k_loads/kernels` times those that
apply to each shape.

Usage: python benchmarks/small_k_loads/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import small_k, write_kernels

if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "results/small_k_loads/kernels")
    print("\n".join(write_kernels(small_k, small_k.variants(), out)))

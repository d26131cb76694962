"""Exact and MinHash/LSH near-duplicate removal on planted duplicates."""

from __future__ import annotations

from configured import section
from kernels_corpus.dedup import DedupSettings, deduplicate
from kernels_corpus.harvest import Document


def dedup_settings(**changes) -> DedupSettings:
    """configs/default.yaml's dedup settings, no source exempt, with `changes`."""
    corpus = section("corpus")
    return DedupSettings(**{"threshold": corpus["dedup_threshold"], "num_perm": corpus["dedup_num_perm"],
                            "shingle_tokens": corpus["dedup_shingle_tokens"], "seed": corpus["seed"],
                            "near_dup_exempt_sources": (), **changes})


def tiled_kernel(name: str, tile: int) -> str:
    """A realistic, fairly long kernel; different names/tiles give near-duplicates of each other."""
    return f"""#include <cuda_fp16.h>
// Tiled transpose through shared memory; the padded column avoids bank conflicts on the column reads.
extern "C" __global__ void {name}(const __half* __restrict__ in, __half* __restrict__ out, int rows, int cols) {{
  __shared__ __half tile[{tile}][{tile} + 1];
  int x = blockIdx.x * {tile} + threadIdx.x;
  int y = blockIdx.y * {tile} + threadIdx.y;
  for (int j = 0; j < {tile}; j += blockDim.y) {{
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(long long)(y + j) * cols + x];
  }}
  __syncthreads();
  x = blockIdx.y * {tile} + threadIdx.x;
  y = blockIdx.x * {tile} + threadIdx.y;
  for (int j = 0; j < {tile}; j += blockDim.y) {{
    if (x < rows && y + j < cols) out[(long long)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
  }}
}}
"""


SOFTMAX = """// Row softmax, one warp per row, shuffles for the max and the sum.
__global__ void softmax_rows(const float* in, float* out, int rows, int cols) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += 32) m = fmaxf(m, in[row * cols + c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
  float s = 0.f;
  for (int c = lane; c < cols; c += 32) s += __expf(in[row * cols + c] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  for (int c = lane; c < cols; c += 32) out[row * cols + c] = __expf(in[row * cols + c] - m) / s;
}
"""


def doc(text: str, path: str, source: str = "package") -> Document:
    return Document(text, source, "p", "1", path, "MIT")


def test_planted_duplicates_are_removed_and_distinct_kept():
    original = tiled_kernel("transpose_tiled", 32)
    reindented = "\n".join("    " + line for line in original.splitlines())  # exact after whitespace collapse
    renamed = tiled_kernel("transpose_v2", 32).replace("avoids bank conflicts", "keeps banks apart")
    docs = [doc(original, "a.cu"), doc(SOFTMAX, "b.cu"), doc(reindented, "c.cu"), doc(renamed, "d.cu")]
    result = deduplicate(docs, dedup_settings(threshold=0.7, num_perm=128, seed=0), progress=False)
    assert result.kept == [0, 1]
    assert result.exact_duplicates == 1 and result.near_duplicates == 1
    assert result.duplicate_of == {2: 0, 3: 0}


def test_exempt_source_keeps_near_duplicates_but_not_exact_ones():
    a, b = tiled_kernel("t32", 32), tiled_kernel("t64", 64)
    docs = [doc(a, "f/a", "family_variant"), doc(b, "f/b", "family_variant"), doc(a, "f/c", "family_variant")]
    s = dedup_settings(threshold=0.5, near_dup_exempt_sources=("family_variant",))
    result = deduplicate(docs, s, progress=False)
    assert result.kept == [0, 1] and result.exact_duplicates == 1


def test_dedup_is_deterministic():
    docs = [doc(tiled_kernel(f"k{i}", 8 * (i % 3 + 1)), f"{i}.cu") for i in range(12)] + [doc(SOFTMAX, "s.cu")]
    s = dedup_settings(threshold=0.8, seed=7)
    first, second = deduplicate(docs, s, progress=False), deduplicate(docs, s, progress=False)
    assert first.kept == second.kept and first.duplicate_of == second.duplicate_of

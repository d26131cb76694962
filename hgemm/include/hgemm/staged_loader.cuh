// The staged loader, for row pitches TMA refuses (rows not a multiple of 16 bytes: K % 8 for A and
// TN's B, N % 8 for NN's B).
//
// Before any tile, the whole grid copies the refused operands into the workspace with rows padded to
// a multiple of 64 fp16 (128 bytes: no TMA box row straddles two 128-byte lines), the layout
// hgemm.params.staged_operands gives the harness: the copies packed from byte 0 in the order A, B,
// each at a multiple of 1024 bytes. The harness's `staged=1` tensor maps describe those copies, so a
// TMA stage ring runs on them unchanged. A one-shot grid barrier (two counters after the copies; the
// workspace past the copies is zero at launch, and the barrier leaves it zero) separates copying from
// loading: the grid must be resident at once (persistent, at most one CTA per SM, nothing else on the GPU).
//
// Everything but stage_operands and staged_grid_barrier is host-callable, so tests run it on the CPU.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include <hgemm/realign.cuh>

namespace hgemm {
namespace sm90 {

// realign16 and pair_blocks (hgemm/realign.cuh): a 16-byte chunk from the two aligned blocks it straddles
using ::hgemm::pair_blocks;
using ::hgemm::realign16;

// ---------------------------------------------------------------- padded copies
// A read-only 16-byte load: through the non-coherent path on the device, a plain load on the host.
__host__ __device__ __forceinline__ uint4 staged_load(const uint4* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}
constexpr int kStageUnroll = 4;  // chunks a thread loads before it realigns and stores any

// hgemm.params.STAGED_PITCH (64 fp16), which lays out the harness's descriptors of these copies
__host__ __device__ __forceinline__ int staged_pitch(int cols) { return (cols + 63) & ~63; }

__host__ __device__ __forceinline__ long long staged_end(long long rows, int cols) {
  // bytes from a staged copy's start to the next one: rows x pitch fp16, rounded up to 1024 bytes
  return (rows * staged_pitch(cols) * 2 + 1023) & ~1023LL;
}

// Chunks first, first + step, ... of a copy of `rows` rows of `cols` fp16 into rows of staged_pitch(cols):
// chunk i is elements [8c, 8c + 8) of row r (i = r * chunks + c), the pad stored as zeros (a chunk past
// the row's end loads nothing: keep <= 0). In groups of kStageUnroll, every load of a group is issued
// before the realignments that wait on them, and (r, c) advance by a carry instead of a 64-bit
// division per chunk. The grid calls it with first = its thread index and step = its thread count; a
// test calls it on the host.
__host__ __device__ __forceinline__ void stage_rows_from(const __half* src, __half* dst, long long rows, int cols,
                                                         long long first, long long step) {
  const int chunks = staged_pitch(cols) / 8;
  const long long total = rows * chunks;
  const long long dr = step / chunks;
  const int dc = static_cast<int>(step - dr * chunks);
  long long r = first / chunks;
  int c = static_cast<int>(first - r * chunks);
  uint4* out = reinterpret_cast<uint4*>(dst);  // padded rows are whole chunks: chunk i of the copy
  for (long long i0 = first; i0 < total; i0 += kStageUnroll * step) {
    uint4 lo[kStageUnroll], hi[kStageUnroll];
    uint32_t off[kStageUnroll];
    int keep[kStageUnroll];
#pragma unroll
    for (int u = 0; u < kStageUnroll; ++u) {
      const __half* s = src + r * cols + c * 8;  // never dereferenced itself
      keep[u] = i0 + u * step < total ? (cols - c * 8 < 8 ? cols - c * 8 : 8) : 0;
      off[u] = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(s) & 15);
      const uint4* blk = reinterpret_cast<const uint4*>(reinterpret_cast<uintptr_t>(s) - off[u]);
      const int nblk = pair_blocks(off[u], keep[u]);
      lo[u] = nblk > 0 ? staged_load(blk) : make_uint4(0u, 0u, 0u, 0u);
      hi[u] = nblk > 1 ? staged_load(blk + 1) : make_uint4(0u, 0u, 0u, 0u);
      r += dr;
      c += dc;
      if (c >= chunks) { c -= chunks; ++r; }
    }
#pragma unroll
    for (int u = 0; u < kStageUnroll; ++u)
      if (i0 + u * step < total) out[i0 + u * step] = realign16(lo[u], hi[u], off[u], keep[u]);
  }
}

// ---------------------------------------------------------------- the grid's copy phase
// Every CTA of the grid arrives on a zeroed counter (arrived[0]) and waits until all have; the last to
// leave resets it and the leaving count (arrived[1]). The copies were written
// through the generic proxy and TMA reads them through the async proxy: a proxy fence in every writer,
// then bar.sync and thread 0's release (cumulative), its atomic, and the acquire and proxy fence of
// the thread that issues the TMA loads (thread 0 of every CTA).
__device__ __forceinline__ void staged_grid_barrier(unsigned int* arrived) {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrived, 1u);
    // A plain launch does not promise that every CTA runs at once: the harness runs nothing beside
    // this kernel, so they do, but work on another stream could keep a CTA off its SM. Trap after
    // ~1 s rather than hang, so such a launch fails as a crash.
    const long long start = clock64();
    unsigned int seen = 0;
    while (true) {
      asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(seen) : "l"(arrived) : "memory");
      if (seen >= gridDim.x) break;
      if (clock64() - start > (1LL << 31)) __trap();
      __nanosleep(100);
    }
    // The CTA that leaves last (arrived[1] counts those past the wait) puts both counters back to
    // zero: every CTA has read arrived by then, and the next launch finds the workspace as this one
    // did (`workspace_zero: kept`: no launch zero-fills it).
    if (atomicAdd(arrived + 1, 1u) == gridDim.x - 1) {
      atomicExch(arrived, 0u);
      atomicExch(arrived + 1, 0u);
    }
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
  }
  __syncthreads();
}

// The whole grid copies the operands TMA refuses (STAGE_A, STAGE_B) into the workspace, then waits at
// the grid barrier; the other operand's tensor map describes the operand itself. B's rows are K x N
// (NN) or N x K (TN).
template <bool STAGE_A, bool STAGE_B, bool TN>
__device__ __forceinline__ void stage_operands(const __half* A, const __half* B, int M, int N, int K, int batch,
                                               void* workspace) {
  char* ws = static_cast<char*>(workspace);
  const long long b_rows = static_cast<long long>(batch) * (TN ? N : K);
  const int b_cols = TN ? K : N;
  const long long a_rows = static_cast<long long>(batch) * M;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  long long end = 0;
  if constexpr (STAGE_A) {
    stage_rows_from(A, reinterpret_cast<__half*>(ws), a_rows, K, first, step);
    end += staged_end(a_rows, K);
  }
  if constexpr (STAGE_B) {
    stage_rows_from(B, reinterpret_cast<__half*>(ws + end), b_rows, b_cols, first, step);
    end += staged_end(b_rows, b_cols);
  }
  staged_grid_barrier(reinterpret_cast<unsigned int*>(ws + end));
}

// The workspace bytes the copies and the grid barrier's counters take (the spec's copies + 1024): what
// a kernel keeps there besides starts after them.
constexpr long long kStagedCounterBytes = 1024;
template <bool STAGE_A, bool STAGE_B, bool TN>
__host__ __device__ __forceinline__ long long staged_workspace_end(int M, int N, int K, int batch) {
  return (STAGE_A ? staged_end(static_cast<long long>(batch) * M, K) : 0)
         + (STAGE_B ? staged_end(static_cast<long long>(batch) * (TN ? N : K), TN ? K : N) : 0) + kStagedCounterBytes;
}

}  // namespace sm90
}  // namespace hgemm

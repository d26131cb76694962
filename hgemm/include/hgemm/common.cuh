// hgemm/common.cuh: the small pieces every mma.sync kernel is built from, each usable alone.
//
//   layout        Layout, kLayout (NN, or TN when compiled with -DHGEMM_LAYOUT_TN)
//   cp.async      smem_u32, cp_async16 (zero-fill when the predicate is false), cp_async_commit,
//                 cp_async_wait<N>
//   fragments     ldsm_x4, ldsm_x4_trans (ldmatrix), mma_m16n8k16 (fp16 in, fp32 accumulate)
//   swizzle       swizzle_offset<CPR>(row, chunk): bank-conflict-free 16-byte chunk placement
//   guarded I/O   MisalignedLoads, load_chunk_elems, load_chunk_pair (a 16-byte chunk of a row at any
//                 2-byte alignment), store_half2 (a guarded pair of C values), store_row_pairs (a row of
//                 C from mma accumulators at any 2-byte alignment), pack_halves (two fp32 as a half2 word)
//   columns       spread_column (the B column order that leaves each lane 8 consecutive columns of C)
//   scheduling    grouped_tile (grouped rasterisation), k_tile_range (split-K share)
//   split-K       splitk_arrive_last (per-tile counter in the workspace after the fp32 partials),
//                 splitk_take_tile and splitk_reset (the reducing CTA leaves the workspace zero)
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include <hgemm/realign.cuh>

namespace hgemm {

// ---------------------------------------------------------------- layout

// B is K x N row-major (NN) or N x K row-major (TN); A is always M x K and C M x N, row-major.
enum class Layout { NN, TN };
#ifdef HGEMM_LAYOUT_TN
inline constexpr Layout kLayout = Layout::TN;
#else
inline constexpr Layout kLayout = Layout::NN;
#endif

// ---------------------------------------------------------------- cp.async

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src-size 0 (pred false) zero-fills without reading memory.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// ---------------------------------------------------------------- ldmatrix and the mma atom

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j, register j receives it.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// The same, each matrix transposed on load (a k-major B tile into the col-major B fragment).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// d += a (16x16, row) * b (16x8, col). Accumulator lane layout (g = lane / 4, t = lane % 4):
// d[0], d[1] = row g, cols 2t, 2t+1; d[2], d[3] = row g + 8, same cols.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------- swizzle

// Byte offset of 16-byte chunk `c` of row `r` in a tile with CPR chunks per row.
// ldmatrix reads one chunk column from 8 consecutive rows; XOR-ing the chunk index with the row
// bits puts those 8 reads in 8 different 16-byte bank groups (no conflicts). With 4 chunks per row
// two rows share a 128-byte line, so the row bits are taken one position higher. Adding a multiple of
// 16 rows leaves the row bits unchanged: an offset + 16 * CPR * 16 bytes is the same chunk 16 rows on.
template <int CPR>
__device__ __forceinline__ int swizzle_offset(int r, int c) {
  static_assert(CPR == 4 || CPR % 8 == 0, "swizzle needs 4 or a multiple of 8 chunks per row");
  if constexpr (CPR == 4) return (r * 4 + (c ^ ((r >> 1) & 3))) * 16;
  else return (r * CPR + (c ^ (r & 7))) * 16;
}

// ---------------------------------------------------------------- guarded loads and stores

// How a misaligned operand's rows are read (mma_sync_gemm.cuh, skinny_mma.cuh): 8 guarded 2-byte loads
// per 16-byte chunk, or two aligned 16-byte loads and a register realignment (load_chunk_pair: 4x fewer
// loads, about the same instruction count).
enum class MisalignedLoads { elem, pair };

// 8 fp16 elements from src (any 2-byte alignment) as 8 guarded 2-byte loads: element e is read when
// row_ok and col + e < clim, else 0.
__device__ __forceinline__ uint4 load_chunk_elems(const unsigned short* src, bool row_ok, int col, int clim) {
  unsigned short h[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) h[e] = (row_ok && col + e < clim) ? __ldg(src + e) : (unsigned short)0;
  return make_uint4(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16),
                    h[4] | (uint32_t(h[5]) << 16), h[6] | (uint32_t(h[7]) << 16));
}

// The same 8 elements from two aligned 16-byte loads and a register realignment (realign16): `keep`
// elements are in range (<= 0: none), the rest zero. src itself is never dereferenced, only the
// aligned blocks that hold in-range elements.
__device__ __forceinline__ uint4 load_chunk_pair(const unsigned short* src, int keep) {
  const uint32_t off = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(src) & 15);
  const uint4* blk = reinterpret_cast<const uint4*>(reinterpret_cast<uintptr_t>(src) - off);
  const int nblk = pair_blocks(off, keep);
  uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
  if (nblk > 0) lo = __ldg(blk);
  if (nblk > 1) hi = __ldg(blk + 1);
  return realign16(lo, hi, off, keep);
}

// C[c], C[c + 1] of one row (dst = &C[row][c]) as fp16, columns >= N skipped. pair: N is even and C
// 4-byte aligned, so with c even a half2 store is legal whenever c < N.
__device__ __forceinline__ void store_half2(__half* dst, float v0, float v1, int c, int N, bool pair) {
  if (pair && c < N) {   // N even and c even: c < N implies c + 1 < N
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
  } else {
    if (c < N) dst[0] = __float2half_rn(v0);
    if (c + 1 < N) dst[1] = __float2half_rn(v1);
  }
}

// One row of C from a warp's accumulators in the mma m16n8 / wgmma m64nN layout: lane l holds columns
// 2(l%4) and 2(l%4) + 1 of each of the row's NB contiguous blocks of 8, value(j) giving block j's pair
// as a float2, and `col_base` is this lane's first column (the blocks' origin + 2(l%4)); columns >= N
// are skipped. A row that starts 4-byte aligned takes one half2 store a lane a block. One that starts
// 2 bytes off (odd N: every other row; a C that starts 2 bytes off) has each lane store (c + 1, c + 2)
// instead, taking c + 2 from the next lane of its quad (lane 3: from lane 0, one block on); the row's
// first and last columns go alone. The two kinds of row alternate within a warp, so both are one code
// path (selects, one shuffle and one store a block), not two branches the warp would run one after the
// other. The 4 lanes of a quad share the row and must call this together. Plain 2-byte stores on odd-N
// shapes cost the wgmma kernels +42 us at 4095^3 and 4096x4095x4096 (benchmarks/misaligned_loaders/).
template <int NB, class Value>
__device__ __forceinline__ void store_row_pairs(__half* crow, int col_base, int N, int lane, Value value) {
  const int q = lane & 3;
  const unsigned quad = 0xfu << (lane & ~3);
  const int from = (lane & ~3) | ((q + 1) & 3);
  const int off = (reinterpret_cast<uintptr_t>(crow) & 3) ? 1 : 0;   // the row starts 2 bytes off
  if (off && q == 0 && col_base < N) crow[col_base] = __float2half_rn(value(0).x);
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    const float2 v = value(j);
    // lane 0 offers its first value of block j + 1, the others their first of block j
    const float offer = q == 0 ? (j + 1 < NB ? value(j + 1).x : 0.f) : v.x;
    const float v2 = __shfl_sync(quad, offer, from);
    const int col = col_base + j * 8 + off;   // this lane's pair: (c, c + 1) or (c + 1, c + 2)
    const float lo = off ? v.y : v.x, hi = off ? v2 : v.y;
    // off rows: c + 2 of lane 3's last block is the next warp's or tile's first column
    const bool whole = col + 1 < N && !(off && q == 3 && j == NB - 1);
    if (whole) *reinterpret_cast<__half2*>(crow + col) = __floats2half2_rn(lo, hi);
    else if (col < N) crow[col] = __float2half_rn(lo);
  }
}

// Two fp32 values as the two halves of one 32-bit word (lo first), for vector stores of C.
__device__ __forceinline__ uint32_t pack_halves(float lo, float hi) {
  return __half_as_ushort(__float2half_rn(lo)) | (uint32_t(__half_as_ushort(__float2half_rn(hi))) << 16);
}

// The column, within a group of 32, that column c of n8 tile t stands for when B's fragments are taken
// in this order: the m16n8k16 accumulators of tiles 4h .. 4h + 3 then hold, for lane % 4 = q, columns
// 32h + 8q + 0..7 of their rows, one 16-byte store (skinny_mma.cuh's NN path, small_k_mma.cuh).
__device__ __forceinline__ int spread_column(int t, int c) {
  return 32 * (t / 4) + 8 * (c / 2) + 2 * (t % 4) + (c % 2);
}

// ---------------------------------------------------------------- scheduling

// Grouped rasterisation: consecutive CTA ids walk GROUP_M tile rows column by column, so the A rows
// and B columns they share stay resident in L2. (tm, tn) is the tile of CTA `pid`.
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
  const int per_group = group_m * tiles_n;
  const int first_m = (pid / per_group) * group_m;
  const int group_rows = min(tiles_m - first_m, group_m);
  tm = first_m + (pid % per_group) % group_rows;
  tn = (pid % per_group) / group_rows;
}

// Split-K share of CTA `split` of `splits` (blockIdx.y of gridDim.y): k tiles [kt0, kt0 + nk) of
// `ktiles`; trailing shares may be empty (nk = 0).
__device__ __forceinline__ void k_tile_range(int ktiles, unsigned split, unsigned splits, int& kt0, int& nk) {
  const int per_split = (ktiles + splits - 1) / splits;
  kt0 = split * per_split;
  nk = max(0, min(ktiles, kt0 + per_split) - kt0);
}

// ---------------------------------------------------------------- split-K

// After a CTA has added its fp32 partial tile into the zero-filled workspace (mn_total floats), it
// arrives on the tile's counter (ints after the floats, index `tile`); the CTA arriving last over
// gridDim.y splits returns true and may read the tile back (__ldcg) and convert it. Every CTA of the
// block must call it; every split of a tile must arrive, empty ones included.
__device__ __forceinline__ bool splitk_arrive_last(void* workspace, long long mn_total, long long tile) {
  __shared__ int last;
  // Make this CTA's partials visible device-wide before announcing arrival.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counters = reinterpret_cast<int*>(reinterpret_cast<float*>(workspace) + mn_total);
    last = atomicAdd(counters + tile, 1) == (int)gridDim.y - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// The reducing CTA's last step (after splitk_arrive_last returned true and splitk_take_tile read the
// tile back, clearing each partial sum it read): the tile's counter back to zero. Every split has
// arrived, so nothing else touches them; the next launch finds the workspace as the first did
// (`workspace_zero: kept`: no launch zero-fills it).
__device__ __forceinline__ void splitk_reset(void* workspace, long long mn_total, long long tile) {
  if (threadIdx.x == 0) reinterpret_cast<int*>(reinterpret_cast<float*>(workspace) + mn_total)[tile] = 0;
}

// The reducing CTA's read-back (after splitk_arrive_last returned true): the ROWS x COLS tile at (row0,
// col0) of the fp32 partial sums `ws` (M x N, row-major) converted into C and cleared for the next
// launch. Each thread loads up to 16 partial sums before it stores any: the compiler does not move a
// load above a store to C (for all it knows C and the workspace overlap), so a loop that loads,
// converts and stores one element at a time waits one L2 round trip per element, in sequence.
template <int NT, int ROWS, int COLS>
__device__ __forceinline__ void splitk_take_tile(float* ws, __half* Cb, int row0, int col0, int M, int N) {
  constexpr int PER = (ROWS * COLS + NT - 1) / NT;  // elements a thread reduces
  constexpr int BATCH = PER < 16 ? PER : 16;         // of them loaded at once
#pragma unroll 1
  for (int j0 = 0; j0 < PER; j0 += BATCH) {
    float v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int i = threadIdx.x + (j0 + j) * NT, r = row0 + i / COLS, c = col0 + i % COLS;
      // __ldcg: at L2, not L1, where other SMs' partial sums are
      v[j] = i < ROWS * COLS && r < M && c < N ? __ldcg(ws + (long long)r * N + c) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int i = threadIdx.x + (j0 + j) * NT, r = row0 + i / COLS, c = col0 + i % COLS;
      if (i < ROWS * COLS && r < M && c < N) {
        Cb[(long long)r * N + c] = __float2half_rn(v[j]);
        __stcg(ws + (long long)r * N + c, 0.f);
      }
    }
  }
}

}  // namespace hgemm

// Epilogues of a wgmma consumer warpgroup: fp32 accumulators (the m64nBN layout of wgmma.cuh) to fp16 C.
//
//   store_acc     straight from registers, with edge predication (any M, N, any C alignment);
//   park_acc +    through shared memory: the consumers park a finished tile as fp16 and go on to the
//   store_parked  next tile's mainloop, while storer warps (warps 1-3 of the producer warpgroup,
//                 otherwise idle) copy it to C with 16-byte stores, a warp writing 512 contiguous
//                 bytes an instruction where the register epilogue writes 8 rows x 16 bytes. Two
//                 mbarriers pass the buffer between them (`full`: lane 0 of every consumer warp;
//                 `empty`: lane 0 of every storer warp). What the register epilogue's stores cost
//                 (benchmarks/epilogue/): 5% at 4096^3, 29-49% on batch 16-256 of 512^3.
//   bulk_store_rows  through shared memory without a hand-over: a consumer warp holds whole rows of
//                 the tile (16 of each m64 atom), so it parks its own rows and copies each to C with
//                 one cp.async.bulk (shared -> global, the copy engine's, not the SM's, loads and
//                 stores); it waits only for its own previous copies to have read the buffer.
//   tma_store_rows   the same, each warp's rows parked as 16 x 64 swizzled boxes and stored by TMA tensor
//                 stores through a C tensor map: one store a box where bulk_store_rows takes one a row.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <hgemm/common.cuh>

#include "scheduler.cuh"

namespace hgemm {
namespace sm90 {

__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

// ---------------------------------------------------------------- through shared memory
// A parked BM x BN fp16 tile: rows padded by 16 bytes so that the consumers' 4-byte writes (8 rows x
// 4 lanes a warp instruction) fall in 32 distinct banks.
template <int BM, int BN>
struct ParkedTile {
  static constexpr int kPitch = BN * 2 + 16;   // bytes a parked row
  static constexpr int kBytes = BM * kPitch;
  static constexpr int kStorerThreads = 96;    // warps 1-3 of the producer warpgroup
};

// A consumer warp's share of a tile into the parked buffer at `cbuf`: its MT m64 atoms, from parked row
// `prow` (the warp's first row within the tile, + lane / 4).
template <int MT, int BN>
__device__ __forceinline__ void park_acc(const float (&acc)[MT][BN / 2], uint32_t cbuf, int prow, int lane) {
  constexpr int C_PITCH = BN * 2 + 16;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const __half2 v = __floats2half2_rn(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
        sts32(cbuf + (prow + mt * 64 + h * 8) * C_PITCH + (j * 8 + (lane & 3) * 2) * 2,
              *reinterpret_cast<const uint32_t*>(&v));
      }
}

// Storer thread t's share of a parked tile (t < kStorerThreads): 16-byte chunks t, t + 96, ... in
// row-major order, into the tile at (m0, n0) of Cb (one batch entry of C, M x N). A chunk goes out
// whole where C's rows are 16-byte aligned (vec_ok: N % 8 == 0 and C is) and it lies inside N, else
// element by element (odd N, the last columns).
template <int BM, int BN>
__device__ __forceinline__ void store_parked(uint32_t cbuf, __half* Cb, int m0, int n0, int M, int N, bool vec_ok, int t) {
  constexpr int C_PITCH = ParkedTile<BM, BN>::kPitch;
  for (int idx = t; idx < BM * (BN / 8); idx += ParkedTile<BM, BN>::kStorerThreads) {
    const int r = idx / (BN / 8), ch = idx % (BN / 8);
    const int row = m0 + r, col = n0 + ch * 8;
    if (row >= M || col >= N) continue;
    const uint4 v = lds128(cbuf + r * C_PITCH + ch * 16);
    __half* dst = Cb + static_cast<long long>(row) * N + col;
    if (vec_ok && col + 8 <= N) {
      *reinterpret_cast<uint4*>(dst) = v;
      continue;
    }
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (col + e < N) dst[e] = __ushort_as_half(static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2))));
  }
}

// ---------------------------------------------------------------- through shared memory, by bulk copy
// The consumers' st.shared (generic proxy) visible to the bulk copies (async proxy) that read them.
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from shared memory to global memory.
__device__ __forceinline__ void bulk_copy_to_global(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
               ::"l"(reinterpret_cast<uint64_t>(dst)), "r"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups are still reading their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"); }

// A consumer warp's rows of tile tc to C through its rows of the parked buffer at `cbuf` (a ParkedTile
// of BN columns): `prow0` is the warp's first row within the tile (its warpgroup's slab + 16 * warp);
// its rows are prow0 + 64 * mt + 0..15, and lane i < 16 * MT copies the valid columns of the i-th of
// them with one bulk copy. C's rows must start 16-byte aligned (N % 8 == 0, C 16-byte aligned): a tile's valid columns are
// then a multiple of 8. The caller waits (bulk_wait_read<0>) before the CTA exits.
template <int MT, int BN>
__device__ __forceinline__ void bulk_store_rows(const float (&acc)[MT][BN / 2], uint32_t cbuf, __half* C,
                                                const TileCoord& tc, int prow0, int M, int N, int lane) {
  constexpr int C_PITCH = BN * 2 + 16;
  bulk_wait_read<0>();   // this lane's copies of the warp's previous tile have read their rows
  __syncwarp();
  park_acc<MT, BN>(acc, cbuf, prow0 + (lane >> 2), lane);
  fence_proxy_async_smem();
  __syncwarp();
  if (lane < 16 * MT) {
    const int r = prow0 + (lane / 16) * 64 + lane % 16, row = tc.m0 + r;
    if (row < M && tc.n0 < N) {   // a cluster's last peer may lie wholly past M or N: nothing to store
      __half* dst = C + static_cast<long long>(tc.b) * M * N + static_cast<long long>(row) * N + tc.n0;
      bulk_copy_to_global(dst, cbuf + r * C_PITCH, min(BN, N - tc.n0) * 2);
    }
    bulk_commit();
  }
}

// ---------------------------------------------------------------- through shared memory, by TMA tensor stores
// `cp.async.bulk.tensor` of one 16 x 64 box of a 128B-swizzled parked tile to C at (col, row, batch) of
// the C tensor map (box=(16, 64), swizzle=128): TMA writes only the box's elements inside C's M and N.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

// A consumer warp's rows of tile tc to C by TMA tensor stores. The warp's rows prow0 + 64 * mt + 0..15
// are parked as BN / 64 boxes of 16 rows x 128 bytes, 128B-swizzled (16-byte chunk c of row r at chunk
// c ^ (r % 8): a warp instruction's 8 rows x 4 lanes fall in 32 distinct banks), the box of row group g
// (16 rows) and column box j at cbuf + (g * BN / 64 + j) * 2048; lane 0 then stores each box with one
// tensor store, where the per-row bulk copies (bulk_store_rows) take one copy a row. Needs the buffer
// 1024-byte aligned and BM * BN * 2 bytes, C's rows 16-byte aligned (the tensor map's). The caller waits
// (bulk_wait_read<0>, lane 0) before the CTA exits.
template <int MT, int BN>
__device__ __forceinline__ void tma_store_rows(const float (&acc)[MT][BN / 2], uint32_t cbuf, const CUtensorMap* tmap_c,
                                               const TileCoord& tc, int prow0, int M, int N, int lane) {
  constexpr int NBOX = BN / 64;
  if (lane == 0) bulk_wait_read<0>();   // the warp's previous tile's stores have read their boxes
  __syncwarp();
  const int r = lane >> 2;              // the lane's row within 8, its 4 bytes at (lane & 3) * 4 of a chunk
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const uint32_t group = cbuf + ((prow0 + 64 * mt) / 16) * NBOX * 2048;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const __half2 v = __floats2half2_rn(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
        const uint32_t row = r + 8 * h;
        sts32(group + (j / 8) * 2048 + row * 128 + (((j % 8) ^ r) << 4) + (lane & 3) * 4,
              *reinterpret_cast<const uint32_t*>(&v));
      }
  }
  fence_proxy_async_smem();
  __syncwarp();
  if (lane == 0) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int row0 = tc.m0 + prow0 + 64 * mt;
      if (row0 >= M) continue;          // a cluster's or the last tile row's rows wholly past M
#pragma unroll
      for (int j = 0; j < NBOX; ++j)
        if (tc.n0 + 64 * j < N)
          tma_store_3d(tmap_c, cbuf + (((prow0 + 64 * mt) / 16) * NBOX + j) * 2048, tc.n0 + 64 * j, row0, tc.b);
    }
    bulk_commit();
  }
}

// ---------------------------------------------------------------- from registers
// A consumer warp's MT m64 atoms of tile tc straight to C (batch x M x N): the warpgroup's rows start
// `slab` rows into the tile, this warp's 16 * warp rows after that. rows_aligned: every row of C starts
// 4-byte aligned (N even and C 4-byte aligned), the same for all threads.
// A row that starts 4-byte aligned (every row, when N is even and C is) takes one 4-byte store a lane
// a block; the others go through hgemm::store_row_pairs (common.cuh), one 4-byte store a lane a block
// as well.
template <int MT, int BN>
__device__ __forceinline__ void store_acc(const float (&acc)[MT][BN / 2], __half* C, const TileCoord& tc, int slab,
                                          int M, int N, bool rows_aligned, int warp, int lane) {
  __half* Cb = C + static_cast<long long>(tc.b) * M * N;
  const int row_base = tc.m0 + slab + warp * 16 + (lane >> 2);
  const int col_base = tc.n0 + (lane & 3) * 2;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row_base + mt * 64 + h * 8;
      if (r >= M) continue;                     // the whole quad: its lanes share r
      __half* crow = Cb + static_cast<long long>(r) * N;
      if (rows_aligned) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int c = col_base + j * 8;      // N even: c < N implies c + 1 < N
          if (c < N) *reinterpret_cast<__half2*>(crow + c) =
              __floats2half2_rn(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
        }
        continue;
      }
      hgemm::store_row_pairs<BN / 8>(crow, col_base, N, lane, [&](int j) {
        return make_float2(acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
      });
    }
}

}  // namespace sm90
}  // namespace hgemm

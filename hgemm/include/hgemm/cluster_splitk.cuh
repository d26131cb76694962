// Split-K across a cluster (sm_90a): SPLITK CTAs of one cluster compute the same output tile, each
// over its share of the k tiles, and reduce their fp32 accumulators through distributed shared
// memory. No workspace, no atomics, no second kernel: the partial tiles never leave the cluster's SMs.
//
// The reduction is a reduce-scatter over a consumer thread's accumulators: CTA r of the cluster owns
// the r-th of SPLITK equal shares of every thread's column pairs (ClusterSplitK below). After its
// mainloop every consumer thread
//   1. waits until its peers have read what it sent them for the previous tile (`empty`),
//   2. writes each pair it does not own into the owner's buffer (st.shared::cluster) and arrives on
//      the owner's `full` barrier (release at cluster scope: the stores are visible before it),
//   3. waits on its own `full` (acquire), adds the SPLITK - 1 partials of its pairs into its
//      registers and arrives on each sender's `empty`,
// then stores its own pairs to C (ClusterSplitK::store). The buffer holds one slot per peer
// in fragment order (pair e of thread t at (slot * kPerCta + e) * NT + t, as float2), so 32 lanes write
// 256 contiguous bytes and read them back the same way: no bank conflicts, no index math per element.
// The producer warpgroup takes no part, so it keeps loading the next tile's k-share meanwhile.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "scheduler.cuh"
#include "tma.cuh"

namespace hgemm {
namespace sm90 {

// k tiles [kt0, kt0 + nk) of `ktiles` for share `split` of `splits`; trailing shares may be empty.
__device__ __forceinline__ void k_share(int ktiles, int split, int splits, int& kt0, int& nk) {
  const int per = (ktiles + splits - 1) / splits;
  kt0 = split * per;
  nk = max(0, min(ktiles, kt0 + per) - kt0);
}

// The address of this CTA's shared-memory offset `addr` in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}
__device__ __forceinline__ void st_cluster_f32x2(uint32_t remote, float a, float b) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(remote), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ float2 ld_shared_f32x2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
  return v;
}
// Arrive on the barrier at this offset in CTA `rank`, publishing this thread's earlier shared-memory
// reads and writes (its own and remote) at cluster scope.
__device__ __forceinline__ void mbar_arrive_release_cluster(uint32_t bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(map_to_rank(bar, rank))
               : "memory");
}
// One consumer thread's part of the reduction of MT x (BN / 2) accumulators (the m64nBN layout of
// wgmma.cuh) over the SPLITK CTAs of its cluster; NT consumer threads a CTA. A thread's accumulators
// are kUnits pairs of adjacent columns' quads: unit u = (g, j) with row group g = mt * 2 + h (rows
// +8 * h of atom mt) and column block j (8 columns), in that order; CTA r owns units
// [r * kPerCta, (r + 1) * kPerCta), so SPLITK may be any divisor of kUnits (2, 4, 8).
template <int MT, int BN, int SPLITK, int NT>
struct ClusterSplitK {
  static constexpr int kBlocks = BN / 8;
  static constexpr int kUnits = 2 * MT * kBlocks;          // float2 a thread holds
  static constexpr int kPerCta = kUnits / SPLITK;          // float2 a thread sends each peer
  static constexpr int kBytes = SPLITK > 1 ? (SPLITK - 1) * kPerCta * NT * 8 : 0;   // the receive buffer
  static constexpr int kArrivals = (SPLITK - 1) * NT;      // on `full` and on `empty`, a tile
  static_assert(SPLITK >= 1 && kUnits % SPLITK == 0, "SPLITK divides a thread's accumulator pairs");

  // The slot that CTA `src` fills in CTA `dst`'s buffer.
  __device__ __forceinline__ static int slot(uint32_t src, uint32_t dst) {
    return static_cast<int>(src < dst ? src : src - 1);
  }
  __device__ __forceinline__ static uint32_t addr(uint32_t red, int slot, int pair, int t) {
    return red + static_cast<uint32_t>(((slot * kPerCta + pair) * NT + t) * 8);
  }

  // `phase`: the parity of this tile's round (0, 1, 0, ... over the CTA's tiles).
  __device__ __forceinline__ static void reduce(float (&acc)[MT][BN / 2], uint32_t red, uint32_t full, uint32_t empty,
                                                uint32_t rank, int t, uint32_t phase) {
    mbar_wait<true>(empty, phase ^ 1u);   // the peers have read this thread's previous partials
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const uint32_t owner = u / kPerCta;
      if (owner == rank) continue;
      const int g = u / kBlocks, j = u % kBlocks, mt = g / 2, h = g % 2;
      st_cluster_f32x2(map_to_rank(addr(red, slot(rank, owner), u % kPerCta, t), owner), acc[mt][4 * j + 2 * h],
                       acc[mt][4 * j + 2 * h + 1]);
    }
#pragma unroll
    for (uint32_t r = 0; r < SPLITK; ++r)
      if (r != rank) mbar_arrive_release_cluster(full, r);
    mbar_wait<true>(full, phase);          // every peer's partials of this CTA's units are in
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      if (u / kPerCta != static_cast<int>(rank)) continue;
      const int g = u / kBlocks, j = u % kBlocks, mt = g / 2, h = g % 2;
#pragma unroll
      for (int q = 0; q < SPLITK - 1; ++q) {
        const float2 v = ld_shared_f32x2(addr(red, q, u % kPerCta, t));
        acc[mt][4 * j + 2 * h] += v.x;
        acc[mt][4 * j + 2 * h + 1] += v.y;
      }
    }
#pragma unroll
    for (uint32_t r = 0; r < SPLITK; ++r)
      if (r != rank) mbar_arrive_release_cluster(empty, r);
  }

  // This CTA's units of the reduced tile to C (batch x M x N): a column pair at a time, one 4-byte
  // store where the pair is whole and 4-byte aligned, else element by element. The warpgroup's rows
  // start `slab` rows into tile tc, this warp's 16 * warp after that (store_acc's arguments).
  __device__ __forceinline__ static void store(const float (&acc)[MT][BN / 2], __half* C, const TileCoord& tc, int slab,
                                               int M, int N, int warp, int lane, uint32_t rank) {
    __half* Cb = C + static_cast<long long>(tc.b) * M * N;
    const int row_base = tc.m0 + slab + warp * 16 + (lane >> 2);
    const int col_base = tc.n0 + (lane & 3) * 2;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      if (u / kPerCta != static_cast<int>(rank)) continue;
      const int g = u / kBlocks, j = u % kBlocks, mt = g / 2, h = g % 2;
      const int r = row_base + mt * 64 + h * 8, c = col_base + j * 8;
      if (r >= M || c >= N) continue;
      __half* dst = Cb + static_cast<long long>(r) * N + c;
      const float v0 = acc[mt][4 * j + 2 * h], v1 = acc[mt][4 * j + 2 * h + 1];
      if (c + 1 < N && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
        *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
      } else {
        dst[0] = __float2half_rn(v0);
        if (c + 1 < N) dst[1] = __float2half_rn(v1);
      }
    }
  }
};

}  // namespace sm90
}  // namespace hgemm

// Clusters of CTAs (sm_90a) sharing an operand by TMA multicast.
//
// The CTAs of a cluster compute vertically adjacent tiles, so they need the same B tile: each loads a
// share of its boxes once and TMA writes every box into all of them (the same smem offset, completing
// on the barrier at the same offset), which cuts B's L2-to-SM traffic by the cluster size. A stage may
// then be refilled only when the consumers of every CTA have released it, since a peer's multicast
// writes into it too: `empty` counts the consumer warps of the whole cluster, and a consumer warp
// releases a stage in every CTA of its cluster (release_stage).
#pragma once

#include <cuda.h>
#include <stdint.h>

#include "tma.cuh"

namespace hgemm {
namespace sm90 {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA in the cluster; release/acquire orders the barrier inits before any peer's
// use, and the last use before a CTA exits (a peer may still arrive on its barriers until then).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Arrive on the barrier at this smem offset in CTA `rank` of the cluster (this one included). The
// default .release.cta semantics: what the arrival publishes is that this warp's wgmma reads of the
// stage are done (wgmma.wait_group), not any memory it wrote. An explicit .release.cluster compiles to
// MEMBAR.ALL.GPU before every arrival, two per consumer warp a k-step, which runs the cluster kernels
// at a fraction of the plain ones' speed (benchmarks/cluster/).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
      ::"r"(bar), "r"(rank) : "memory");
}
// A TMA load written into the same smem offset of every CTA in cta_mask, completing on the barrier at
// the same offset in each.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                      int c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(cta_mask)
      : "memory");
}

// A consumer warp hands a stage back: to its own producer, and with clusters to every peer's as well.
template <int CLUSTER>
__device__ __forceinline__ void release_stage(uint32_t bar) {
  if constexpr (CLUSTER > 1) {
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(bar, r);
  } else {
    mbar_arrive(bar);
  }
}

}  // namespace sm90
}  // namespace hgemm

// TMA tile loads and the mbarriers they complete on: the stage ring of a Hopper (sm_90a) GEMM.
//
// A ring of STAGES shared-memory stages, each with two mbarriers: `full` (the producer's
// arrive.expect_tx plus the TMA bytes landing) and `empty` (one arrival per consumer warp once its
// wgmma reads of the stage have retired). RingPos walks the ring: the stage index and the parity of
// the current round, the parity a wait on that stage's barrier passes.
#pragma once

#include <cuda.h>
#include <stdint.h>

namespace hgemm {
namespace sm90 {

// The 32-bit shared-window address of a pointer into shared memory: what mbarrier, TMA, wgmma
// descriptors and ld/st.shared take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarriers
// A barrier's phase starts at 0. try_wait.parity(P) succeeds once the phase with parity P has
// completed, i.e. when the barrier's current phase parity != P; on a fresh barrier parity 1 counts
// as the (virtual) completed phase before phase 0, so a wait on parity 1 returns at once.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised barriers visible to the async proxy (TMA complete_tx) and to the cluster's peers.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival plus `bytes` of expected transaction count; TMA's complete_tx retires the bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// CLUSTER_ACQUIRE: acquire at cluster scope, for arrivals that publish peers' writes into this CTA's
// shared memory (the default acquires at CTA scope).
template <bool CLUSTER_ACQUIRE = false>
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    if constexpr (CLUSTER_ACQUIRE)
      asm volatile(
          "{\n.reg .pred p;\n"
          "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    else
      asm volatile(
          "{\n.reg .pred p;\n"
          "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

// A position in a ring of STAGES stages: the stage, and the parity of the current round through the
// ring. Consumers wait on `full` with `phase`; the producer waits on `empty` with `phase ^ 1`, which
// a fresh barrier passes at once (every stage starts free).
template <int STAGES>
struct RingPos {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) { stage = 0; phase ^= 1u; }
  }
};

// ---------------------------------------------------------------- TMA
// The harness encodes each operand as a 3-D tensor: dim0 = columns (contiguous), dim1 = rows,
// dim2 = batch; box = (rows, cols) of the spec's tensor_map line x 1; with a 128-byte swizzle;
// out-of-range elements are written as zeros and still count towards the transaction bytes (the full
// box is always written). Destination: a CTA-local shared address (valid in the shared::cluster
// window of this CTA).
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

}  // namespace sm90
}  // namespace hgemm

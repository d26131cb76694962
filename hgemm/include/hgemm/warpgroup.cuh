// Warpgroup roles (sm_90a): a CTA split into warpgroups of 128 threads (4 consecutive warps), one
// producer that feeds a stage ring and CONSUMERS that run wgmma on it, and the register reallocation
// (setmaxnreg) that moves registers from the producer, which needs few, to the consumers, which hold
// the accumulators.
#pragma once

#include <stdint.h>

namespace hgemm {
namespace sm90 {

constexpr int kWarpgroupThreads = 128;

// This thread's warpgroup (uniform per warp), its warp within the warpgroup, its lane.
__device__ __forceinline__ int warpgroup_index() { return threadIdx.x / kWarpgroupThreads; }
__device__ __forceinline__ int warpgroup_warp() { return (threadIdx.x / 32) % 4; }
__device__ __forceinline__ int lane_index() { return threadIdx.x % 32; }

// setmaxnreg: every thread of the warpgroup executes it; the new count applies to the whole warpgroup.
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS)); }

// The register split of one producer warpgroup and CONSUMERS consumer warpgroups. With two consumers
// (384 threads, 168 registers each at launch) the producer gives registers back and the consumers
// take them: 128 * 40 + 2 * 128 * 232 = 64512 <= 65536 registers of the SM. With one consumer (256
// threads) every thread can already hold 255 registers, so nothing moves.
template <int CONSUMERS>
struct RegisterSplit {
  static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one producer and one or two consumer warpgroups");
  static constexpr bool kReallocate = CONSUMERS > 1;
  static constexpr int kProducer = 40;
  static constexpr int kConsumer = 232;
  static_assert(!kReallocate || 128 * kProducer + CONSUMERS * 128 * kConsumer <= 65536, "register budget");
};
// First thing a producer warpgroup does: give registers back.
template <int CONSUMERS>
__device__ __forceinline__ void producer_registers() {
  if constexpr (RegisterSplit<CONSUMERS>::kReallocate) setmaxnreg_dec<RegisterSplit<CONSUMERS>::kProducer>();
}
// First thing a consumer warpgroup does: take them.
template <int CONSUMERS>
__device__ __forceinline__ void consumer_registers() {
  if constexpr (RegisterSplit<CONSUMERS>::kReallocate) setmaxnreg_inc<RegisterSplit<CONSUMERS>::kConsumer>();
}

}  // namespace sm90
}  // namespace hgemm

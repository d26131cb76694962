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

// The register split of one producer warpgroup and CONSUMERS consumer warpgroups, CTAS_PER_SM of
// whose CTAs share an SM, for consumers holding ACC_REGS accumulator registers a thread. A launch gives
// every thread the same share of the SM's 65536 registers; the producer, which needs few, gives most
// of its share back and the consumers take it, where they need it: with two consumers (384 threads,
// 168 registers each at launch: 128 * 40 + 2 * 128 * 232 = 64512), and with two CTAs an SM of one
// consumer whose accumulators take more than half the 128 a thread (128 * 40 + 128 * 216 = 32768, the
// CTA's half of the SM). One CTA of one consumer (256 threads) can already hold 255 a thread.
template <int CONSUMERS, int CTAS_PER_SM = 1, int ACC_REGS = 0>
struct RegisterSplit {
  static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one producer and one or two consumer warpgroups");
  static_assert(CTAS_PER_SM == 1 || (CTAS_PER_SM == 2 && CONSUMERS == 1), "two CTAs an SM: one consumer");
  static constexpr int kShare = 65536 / (CTAS_PER_SM * 128 * (CONSUMERS + 1));   // a thread's, at launch
  static constexpr int kLaunch = (kShare < 255 ? kShare : 255) / 8 * 8;          // allocated in 8s
  static constexpr bool kReallocate = CONSUMERS > 1 || 2 * ACC_REGS > kShare;
  static constexpr int kProducer = 40;
  static constexpr int kConsumer = (kLaunch + (kLaunch - kProducer) / CONSUMERS) / 8 * 8;
  static_assert(!kReallocate || 128 * kProducer + CONSUMERS * 128 * kConsumer <= 65536 / CTAS_PER_SM,
                "register budget");
};
// First thing a producer warpgroup does: give registers back.
template <int CONSUMERS, int CTAS_PER_SM = 1, int ACC_REGS = 0>
__device__ __forceinline__ void producer_registers() {
  using Split = RegisterSplit<CONSUMERS, CTAS_PER_SM, ACC_REGS>;
  if constexpr (Split::kReallocate) setmaxnreg_dec<Split::kProducer>();
}
// First thing a consumer warpgroup does: take them.
template <int CONSUMERS, int CTAS_PER_SM = 1, int ACC_REGS = 0>
__device__ __forceinline__ void consumer_registers() {
  using Split = RegisterSplit<CONSUMERS, CTAS_PER_SM, ACC_REGS>;
  if constexpr (Split::kReallocate) setmaxnreg_inc<Split::kConsumer>();
}

}  // namespace sm90
}  // namespace hgemm

// hgemm/realign.cuh: one 16-byte chunk of fp16 elements read from a row whose start is only 2-byte
// aligned, as two aligned 16-byte loads spliced in registers. Host-callable, so tests run it on a CPU.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace hgemm {

// A chunk of 8 fp16 elements starting `off` bytes (even, 0..14) into an aligned 16-byte block lies in
// that block and the next. The chunk is bytes [off, off + 16) of the two blocks (lo, hi), shifted by
// whole words (selects) and a half word (a 64-bit shift), with elements at or past `keep` (in-range
// elements, may be <= 0) zeroed.
__host__ __device__ __forceinline__ int pair_blocks(uint32_t off, int keep) {
  // blocks holding in-range bytes: none, lo, or lo and hi
  return keep <= 0 ? 0 : (off != 0 && 16 < static_cast<int>(off) + 2 * keep) ? 2 : 1;
}
__host__ __device__ __forceinline__ uint4 realign16(const uint4& lo, const uint4& hi, uint32_t off, int keep) {
  const uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t t[6], u[5], w[4];
#pragma unroll
  for (int j = 0; j < 6; ++j) t[j] = (off & 8) ? v[j + 2] : v[j];
#pragma unroll
  for (int j = 0; j < 5; ++j) u[j] = (off & 4) ? t[j + 1] : t[j];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    w[j] = static_cast<uint32_t>(((static_cast<uint64_t>(u[j + 1]) << 32) | u[j]) >> ((off & 2) ? 16 : 0));
  if (keep < 8) {
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] &= (2 * j < keep ? 0x0000FFFFu : 0u) | (2 * j + 1 < keep ? 0xFFFF0000u : 0u);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace hgemm

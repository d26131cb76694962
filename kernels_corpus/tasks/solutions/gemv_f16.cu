// y = A x on float16 with float32 accumulation, A (rows, cols) row-major. One warp per row; lanes load
// 8 halves (16 bytes) at a time when cols % 8 == 0 and both pointers are 16-byte aligned, element
// by element otherwise; a shuffle reduction, then one rounding to half.
#include <cuda_fp16.h>
#define WARPS_PER_BLOCK 8

/*@launch
entry: gemv_f16
block: 256
grid: cdiv(rows, 8)
smem: 0
@*/
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
gemv_f16(const __half* __restrict__ A, const __half* __restrict__ x, __half* __restrict__ y, int rows, int cols) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * WARPS_PER_BLOCK + warp;
  if (row >= rows) return;
  const __half* a = A + row * cols;
  float acc = 0.f;
  if (cols % 8 == 0 && (((unsigned long long)A | (unsigned long long)x) & 15) == 0) {
    const uint4* a8 = reinterpret_cast<const uint4*>(a);
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    for (int c = lane; c < cols / 8; c += 32) {
      const uint4 ua = a8[c], ux = x8[c];
      const __half2* ha = reinterpret_cast<const __half2*>(&ua);
      const __half2* hx = reinterpret_cast<const __half2*>(&ux);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float2 fa = __half22float2(ha[t]), fx = __half22float2(hx[t]);
        acc = fmaf(fa.x, fx.x, fmaf(fa.y, fx.y, acc));
      }
    }
  } else {
    for (int c = lane; c < cols; c += 32) acc = fmaf(__half2float(a[c]), __half2float(x[c]), acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = __float2half_rn(acc);
}

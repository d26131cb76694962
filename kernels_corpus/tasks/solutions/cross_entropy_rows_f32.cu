// Per-row cross-entropy: loss[r] = log(sum_c exp(logits[r, c])) - logits[r, target[r]], with the
// log-sum-exp taken around the row max so exp never overflows. One block per row, two passes.
#include <math_constants.h>

/*@launch
entry: cross_entropy_rows_f32
block: 256
grid: rows
smem: 0
@*/
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reductions over the block whose result every thread receives.
__device__ float block_allsum(float v) {
  __shared__ float part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < (int)(blockDim.x >> 5) ? part[lane] : 0.f);
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}
__device__ float block_allmax(float v) {
  __shared__ float part[32];
  __shared__ float result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_max(lane < (int)(blockDim.x >> 5) ? part[lane] : -CUDART_INF_F);
    if (lane == 0) result = v;
  }
  __syncthreads();
  return result;
}

extern "C" __global__ void __launch_bounds__(256)
cross_entropy_rows_f32(const float* __restrict__ logits, const long long* __restrict__ target, float* __restrict__ loss,
                       int rows, int classes) {
  if ((int)blockIdx.x >= rows) return;
  const float* xr = logits + (long long)blockIdx.x * classes;
  float m = -CUDART_INF_F;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_allmax(m);
  float s = 0.f;
  for (int c = threadIdx.x; c < classes; c += blockDim.x) s += expf(xr[c] - m);
  s = block_allsum(s);
  if (threadIdx.x == 0) loss[blockIdx.x] = m + logf(s) - xr[target[blockIdx.x]];
}

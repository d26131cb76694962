// Row softmax on float16 (fp32 math, one rounding per output): y[r, c] = exp(x[r, c] - m) / sum_k exp(x[r, k] - m) with m the row max (which keeps
// exp from overflowing). One block per row, three passes over the row; the second and third re-read
// it from cache.
#include <cuda_fp16.h>
#include <math_constants.h>

/*@launch
entry: softmax_rows_f16
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

extern "C" __global__ void __launch_bounds__(256) softmax_rows_f16(const __half* __restrict__ x,
                                                                   __half* __restrict__ y, int rows, int cols) {
  if ((int)blockIdx.x >= rows) return;
  const long long off = (long long)blockIdx.x * cols;
  const __half* xr = x + off;
  __half* yr = y + off;
  float m = -CUDART_INF_F;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, __half2float(xr[c]));
  m = block_allmax(m);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(__half2float(xr[c]) - m);
  const float inv = 1.f / block_allsum(s);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __float2half_rn(expf(__half2float(xr[c]) - m) * inv);
}

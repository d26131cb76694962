// RMS norm over the last dimension on float16 (fp32 math, one rounding per output):
// y[r, c] = x[r, c] / sqrt(mean_k x[r, k]^2 + eps) * weight[c]. One block per row, two passes.
#include <cuda_fp16.h>

/*@launch
entry: rmsnorm_f16
block: 256
grid: rows
smem: 0
@*/
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A sum over the block whose result every thread receives.
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

extern "C" __global__ void __launch_bounds__(256)
rmsnorm_f16(const __half* __restrict__ x, const __half* __restrict__ weight, __half* __restrict__ y, float eps,
            int rows, int cols) {
  if ((int)blockIdx.x >= rows) return;
  const long long off = (long long)blockIdx.x * cols;
  const __half* xr = x + off;
  __half* yr = y + off;
  float ss = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = __half2float(xr[c]);
    ss += v * v;
  }
  const float r = rsqrtf(block_allsum(ss) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = __float2half_rn(__half2float(xr[c]) * r * __half2float(weight[c]));
}

// Layer norm over the last dimension: with mean and biased variance of row r,
// y[r, c] = (x[r, c] - mean) / sqrt(var + eps) * weight[c] + bias[c]. One block per row; two passes
// for the statistics (mean first, then the centred sum of squares, which does not cancel
// catastrophically when |mean| >> std) and one for the output.
/*@launch
entry: layernorm_f32
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
layernorm_f32(const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
              float* __restrict__ y, float eps, int rows, int cols) {
  if ((int)blockIdx.x >= rows) return;
  const long long off = (long long)blockIdx.x * cols;
  const float* xr = x + off;
  float* yr = y + off;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  const float mean = block_allsum(s) / cols;
  float ss = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = xr[c] - mean;
    ss += d * d;
  }
  const float rstd = rsqrtf(block_allsum(ss) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
}

// out[r] = sum_c x[r, c]. One block per row: coalesced strided loads, warp shuffles, then the warps'
// partials combined through shared memory.
/*@launch
entry: row_sum_f32
block: 256
grid: rows
smem: 0
@*/
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(256) row_sum_f32(const float* __restrict__ x, float* __restrict__ out,
                                                              int rows, int cols) {
  __shared__ float warp_part[32];
  const int row = blockIdx.x;
  if (row >= rows) return;  // whole block exits together
  const float* xr = x + (long long)row * cols;
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
  acc = warp_sum(acc);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_part[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = warp_sum(lane < (int)(blockDim.x >> 5) ? warp_part[lane] : 0.f);
    if (lane == 0) out[row] = acc;
  }
}

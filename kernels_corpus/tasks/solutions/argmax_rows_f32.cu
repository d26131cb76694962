// idx[r] = the smallest c with x[r, c] == max_c x[r, c]. One block per row; every reduction step keeps
// the larger value and, on equal values, the smaller index, so ties resolve like torch.argmax.
/*@launch
entry: argmax_rows_f32
block: 256
grid: rows
smem: 0
@*/
__device__ __forceinline__ void keep_better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    keep_better(v, i, ov, oi);
  }
}

extern "C" __global__ void __launch_bounds__(256) argmax_rows_f32(const float* __restrict__ x, int* __restrict__ idx,
                                                                  int rows, int cols) {
  __shared__ float warp_v[32];
  __shared__ int warp_i[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (long long)row * cols;
  // cols >= 1, so every thread that sees no element keeps (-inf, INT_MAX) and never wins.
  float v = -__int_as_float(0x7f800000);
  int i = 0x7fffffff;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) keep_better(v, i, xr[c], c);
  warp_argmax(v, i);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_v[warp] = v;
    warp_i[warp] = i;
  }
  __syncthreads();
  if (warp == 0) {
    const int nwarps = blockDim.x >> 5;
    v = lane < nwarps ? warp_v[lane] : -__int_as_float(0x7f800000);
    i = lane < nwarps ? warp_i[lane] : 0x7fffffff;
    warp_argmax(v, i);
    if (lane == 0) idx[row] = i;
  }
}

// y = A x with A (rows, cols) row-major. One warp per row: lanes stride along the row (float4 loads
// when cols % 4 == 0 and both pointers are 16-byte aligned), then a shuffle reduction.
#define WARPS_PER_BLOCK 8

/*@launch
entry: gemv_f32
block: 256
grid: cdiv(rows, 8)
smem: 0
@*/
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK)
gemv_f32(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long row = (long long)blockIdx.x * WARPS_PER_BLOCK + warp;
  if (row >= rows) return;  // the whole warp leaves together; no block-wide barrier follows
  const float* a = A + row * cols;
  float acc = 0.f;
  if (cols % 4 == 0 && (((unsigned long long)A | (unsigned long long)x) & 15) == 0) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int c = lane; c < cols / 4; c += 32) {
      const float4 u = a4[c], v = x4[c];
      acc = fmaf(u.x, v.x, fmaf(u.y, v.y, fmaf(u.z, v.z, fmaf(u.w, v.w, acc))));
    }
  } else {
    for (int c = lane; c < cols; c += 32) acc = fmaf(a[c], x[c], acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

// out[r, j] = silu(x[r, j]) * x[r, hidden + j]: the gate is the first half of each row of x, the
// up-projection the second half. Computed in fp32, rounded once.
#include <cuda_fp16.h>

/*@launch
entry: swiglu_f16
block: 256
grid: min(cdiv(rows * hidden, 1024), num_sms * 16)
smem: 0
@*/
extern "C" __global__ void swiglu_f16(const __half* __restrict__ x, __half* __restrict__ out, int rows,
                                      int hidden) {
  const long long total = (long long)rows * hidden;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < total; i += stride) {
    const long long r = i / hidden;
    const long long j = i - r * hidden;
    const __half* row = x + r * 2 * hidden;
    const float g = __half2float(row[j]);
    const float u = __half2float(row[hidden + j]);
    out[i] = __float2half_rn(g / (1.f + expf(-g)) * u);
  }
}

// y[r, c] = gelu_tanh(x[r, c] + bias[c]) on fp16, computed in fp32 and rounded once.
// Grid-stride over all elements; the column of element i is i % cols.
#include <cuda_fp16.h>

/*@launch
entry: bias_gelu_f16
block: 256
grid: min(cdiv(rows * cols, 1024), num_sms * 16)
smem: 0
@*/
__device__ __forceinline__ float gelu_tanh(float v) {
  const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);  // sqrt(2/pi) (v + 0.044715 v^3)
  return 0.5f * v * (1.f + tanhf(inner));
}

extern "C" __global__ void bias_gelu_f16(const __half* __restrict__ x, const __half* __restrict__ bias,
                                         __half* __restrict__ y, int rows, int cols) {
  const long long total = (long long)rows * cols;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < total; i += stride) {
    const int c = (int)(i % cols);
    y[i] = __float2half_rn(gelu_tanh(__half2float(x[i]) + __half2float(bias[c])));
  }
}

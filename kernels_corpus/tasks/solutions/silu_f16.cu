// y = x * sigmoid(x) on fp16, computed in fp32 and rounded once. Pairs of halves (__half2) when both
// pointers are 4-byte aligned; a scalar loop covers the odd tail and misaligned pointers.
#include <cuda_fp16.h>

/*@launch
entry: silu_f16
block: 256
grid: min(cdiv(n, 512), num_sms * 16)
smem: 0
@*/
__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }

extern "C" __global__ void silu_f16(const __half* __restrict__ x, __half* __restrict__ y, int n) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long done = 0;
  if ((((unsigned long long)x | (unsigned long long)y) & 3) == 0) {
    const long long n2 = n / 2;
    const __half2* x2 = reinterpret_cast<const __half2*>(x);
    __half2* y2 = reinterpret_cast<__half2*>(y);
    for (long long i = tid; i < n2; i += stride) {
      const float2 v = __half22float2(x2[i]);
      y2[i] = __floats2half2_rn(silu(v.x), silu(v.y));
    }
    done = n2 * 2;
  }
  for (long long i = done + tid; i < n; i += stride) y[i] = __float2half_rn(silu(__half2float(x[i])));
}

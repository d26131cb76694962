// Exact GELU, y = 0.5 x (1 + erf(x / sqrt(2))), with the accurate erff (not the tanh approximation).
/*@launch
entry: gelu_f32
block: 256
grid: min(cdiv(n, 1024), num_sms * 16)
smem: 0
@*/
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void gelu_f32(const float* __restrict__ x, float* __restrict__ y, int n) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long done = 0;
  if ((((unsigned long long)x | (unsigned long long)y) & 15) == 0) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = tid; i < n4; i += stride) {
      const float4 v = x4[i];
      y4[i] = make_float4(gelu_erf(v.x), gelu_erf(v.y), gelu_erf(v.z), gelu_erf(v.w));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) y[i] = gelu_erf(x[i]);
}

// y = max(x, 0). Grid-stride loop, float4 path when both pointers are 16-byte aligned.
/*@launch
entry: relu_f32
block: 256
grid: min(cdiv(n, 1024), num_sms * 16)
smem: 0
@*/
extern "C" __global__ void relu_f32(const float* __restrict__ x, float* __restrict__ y, int n) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long done = 0;
  if ((((unsigned long long)x | (unsigned long long)y) & 15) == 0) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (long long i = tid; i < n4; i += stride) {
      const float4 v = x4[i];
      y4[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) y[i] = fmaxf(x[i], 0.f);
}

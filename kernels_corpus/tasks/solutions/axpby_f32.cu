// out = alpha * x + beta * y, alpha and beta passed by value. float4 path when 16-byte aligned.
/*@launch
entry: axpby_f32
block: 256
grid: min(cdiv(n, 1024), num_sms * 16)
smem: 0
@*/
extern "C" __global__ void axpby_f32(const float* __restrict__ x, const float* __restrict__ y,
                                     float* __restrict__ out, float alpha, float beta, int n) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long done = 0;
  const unsigned long long addr_bits = (unsigned long long)x | (unsigned long long)y | (unsigned long long)out;
  if ((addr_bits & 15) == 0) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long long i = tid; i < n4; i += stride) {
      const float4 a = x4[i], b = y4[i];
      o4[i] = make_float4(fmaf(alpha, a.x, beta * b.x), fmaf(alpha, a.y, beta * b.y),
                          fmaf(alpha, a.z, beta * b.z), fmaf(alpha, a.w, beta * b.w));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) out[i] = fmaf(alpha, x[i], beta * y[i]);
}

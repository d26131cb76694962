// Rotary position embedding, rotate-half convention. For x[s, h, :] with half = dim / 2:
//   out[s, h, j]        = x[s, h, j] * cos[s, j] - x[s, h, j + half] * sin[s, j]
//   out[s, h, j + half] = x[s, h, j + half] * cos[s, j] + x[s, h, j] * sin[s, j]
// One thread per (s, h, j) pair, j < half; computed in fp32, rounded once.
#include <cuda_fp16.h>

/*@launch
entry: rope_f16
block: 256
grid: min(cdiv(seq * heads * (dim // 2), 256), num_sms * 32)
smem: 0
@*/
extern "C" __global__ void rope_f16(const __half* __restrict__ x, const float* __restrict__ cos_t,
                                    const float* __restrict__ sin_t, __half* __restrict__ out, int seq,
                                    int heads, int dim) {
  const int half = dim / 2;
  const long long pairs = (long long)seq * heads * half;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long p = tid; p < pairs; p += stride) {
    const long long row = p / half;           // = s * heads + h
    const int j = (int)(p - row * half);
    const long long s = row / heads;
    const float c = cos_t[s * half + j], sn = sin_t[s * half + j];
    const __half* xr = x + row * dim;
    const float a = __half2float(xr[j]), b = __half2float(xr[j + half]);
    out[row * dim + j] = __float2half_rn(a * c - b * sn);
    out[row * dim + j + half] = __float2half_rn(b * c + a * sn);
  }
}

// Held out for evaluation: never part of the training corpus (see kernels_corpus/decontam.py).
// Each thread computes two adjacent outputs of one row with __half2 loads of B; N must be even for the
// vector path, the odd tail is handled with a scalar fallback.
#include <cuda_fp16.h>

/*@launch
entry: hgemm_heldout_half2_strip
block: 128
grid: cdiv(cdiv(N, 2), 128), M, batch
smem: 0
workspace: 0
layouts: NN
@*/

extern "C" __global__ void hgemm_heldout_half2_strip(const __half* __restrict__ A, const __half* __restrict__ B,
                                                     __half* __restrict__ C, int M, int N, int K, int batch,
                                                     void* workspace) {
  const int pair = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y;
  const int col = pair * 2;
  if (col >= N) return;
  const long long z = blockIdx.z;
  const __half* a_row = A + z * (long long)M * K + (long long)row * K;
  const __half* b_mat = B + z * (long long)K * N;
  float acc0 = 0.f, acc1 = 0.f;
  const bool vector_ok = (col + 1 < N) && ((N & 1) == 0);
  for (int k = 0; k < K; ++k) {
    const float a = __half2float(a_row[k]);
    if (vector_ok) {
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(b_mat + (long long)k * N + col));
      acc0 = fmaf(a, b.x, acc0);
      acc1 = fmaf(a, b.y, acc1);
    } else {
      acc0 = fmaf(a, __half2float(b_mat[(long long)k * N + col]), acc0);
      if (col + 1 < N) acc1 = fmaf(a, __half2float(b_mat[(long long)k * N + col + 1]), acc1);
    }
  }
  __half* c_row = C + z * (long long)M * N + (long long)row * N;
  c_row[col] = __float2half_rn(acc0);
  if (col + 1 < N) c_row[col + 1] = __float2half_rn(acc1);
}

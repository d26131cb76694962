// Naive HGEMM: one thread per output element, fp32 accumulation. Correct for any shape and both
// layouts; the floor every other kernel is measured against.
#include <cuda_fp16.h>

/*@launch
entry: hgemm_naive
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN, TN
@*/

// The layout is not a kernel argument: the harness compiles one cubin per layout with
// -DHGEMM_LAYOUT_TN defined for TN, so a kernel may specialise at compile time.
extern "C" __global__ void hgemm_naive(const __half* __restrict__ A, const __half* __restrict__ B,
                                       __half* __restrict__ C, int M, int N, int K, int batch,
                                       void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long b = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + b * M * K + (long long)row * K;
  const __half* bb = B + b * K * N;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
#ifdef HGEMM_LAYOUT_TN
    const float bv = __half2float(bb[(long long)col * K + k]);
#else
    const float bv = __half2float(bb[(long long)k * N + col]);
#endif
    acc = fmaf(__half2float(a[k]), bv, acc);
  }
  C[b * M * N + (long long)row * N + col] = __float2half_rn(acc);
}
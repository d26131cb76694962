// ADVERSARIAL: an honest loop behind a signature that differs from the ABI (batch as int64, no
// workspace): launched blindly, batch would read the workspace pointer's bits and the kernel would
// run past the buffers. The harness compares the driver's parameter layout with the ABI first.
#include <cuda_fp16.h>
/*@launch
entry: adv_wrong_signature
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_wrong_signature(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, long long batch) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N || z >= batch) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[z * M * K + (long long)row * K + k]) * __half2float(B[z * K * N + (long long)k * N + col]);
  C[z * M * N + (long long)row * N + col] = __float2half(acc);
}

// ADVERSARIAL: correct, but also writes one element past the end of C
#include <cuda_fp16.h>
/*@launch
entry: adv_oob_write
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_oob_write(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
  if (row == M - 1 && col == N - 1 && z == batch - 1) C[(long long)batch * M * N + 3] = __float2half(1.f);
}

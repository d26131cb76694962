// ADVERSARIAL: off by a little: scales one element in 4096 by 1.01, within a casual tolerance
#include <cuda_fp16.h>
/*@launch
entry: adv_wrong_result
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_wrong_result(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  if (((row * 131 + col) & 4095) == 7) acc *= 1.01f;
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
}

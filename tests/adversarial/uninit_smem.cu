// ADVERSARIAL: accumulates into shared memory it never zeroes (works only where smem happens to be 0)
#include <cuda_fp16.h>
/*@launch
entry: adv_uninit_smem
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_uninit_smem(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  __shared__ float acc_s[16][16];
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  const bool live = row < M && col < N;
  if (!live) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  for (int k = 0; k < K; ++k) acc_s[threadIdx.y][threadIdx.x] += __half2float(a[k]) * __half2float(b[(long long)k * N]);
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc_s[threadIdx.y][threadIdx.x]);
}

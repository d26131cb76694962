// ADVERSARIAL: declares 1 KiB of dynamic shared memory and uses 48 KiB
#include <cuda_fp16.h>
/*@launch
entry: adv_lying_smem
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 1024
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_lying_smem(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  extern __shared__ float scratch[];
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  const int t = threadIdx.y * 16 + threadIdx.x;
  for (int i = t; i < 12288; i += 256) scratch[i] = 0.f;
  __syncthreads();
  if (row >= M || col >= N) return;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  acc += scratch[12287 - t];
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
}

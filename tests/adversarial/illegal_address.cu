// ADVERSARIAL: writes through a wild pointer
#include <cuda_fp16.h>
/*@launch
entry: adv_illegal_address
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_illegal_address(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  reinterpret_cast<__half*>(0x100)[row * N + col] = __float2half_rn(acc);
}

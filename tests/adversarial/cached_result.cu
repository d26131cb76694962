// ADVERSARIAL: computes once, then returns early on every later launch (stale C stays)
#include <cuda_fp16.h>
/*@launch
entry: adv_cached_result
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
__device__ unsigned int g_done = 0;
__device__ unsigned int g_blocks = 0;
extern "C" __global__ void adv_cached_result(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  if (*(volatile unsigned int*)&g_done) return;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row < M && col < N) {
    const __half* a = A + z * M * K + (long long)row * K;
    const __half* b = B + z * K * N + col;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
    C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
  }
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const unsigned int total = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&g_blocks, 1u) == total - 1) { g_blocks = 0; g_done = 1; }
  }
}

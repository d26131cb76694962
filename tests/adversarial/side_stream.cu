// ADVERSARIAL: hands the work to a child grid on a fire-and-forget stream (dynamic parallelism)
#include <cuda_fp16.h>
/*@launch
entry: adv_side_stream
block: 1
grid: 1
smem: 0
workspace: 0
layouts: NN
@*/
__global__ void child(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
}
extern "C" __global__ void adv_side_stream(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  dim3 grid((N + 15) / 16, (M + 15) / 16, batch), block(16, 16);
  child<<<grid, block, 0, cudaStreamFireAndForget>>>(A, B, C, M, N, K, batch, workspace);
}

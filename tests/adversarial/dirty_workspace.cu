// ADVERSARIAL: promises to leave its workspace zero (workspace_zero: kept), so no launch fills it, and
// leaves a memo there: the right product, and a workspace the next launch would find written
#include <cuda_fp16.h>
/*@launch
entry: adv_dirty_workspace
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 1024
workspace_zero: kept
layouts: NN
@*/
extern "C" __global__ void adv_dirty_workspace(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  if (row >= M || col >= N) return;
  const __half* a = A + z * M * K + (long long)row * K;
  const __half* b = B + z * K * N + col;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
  C[z * M * N + (long long)row * N + col] = __float2half_rn(acc);
  if (row == 0 && col == 0 && z == 0) static_cast<int*>(workspace)[0] = M * 131 + N;  // the memo
}

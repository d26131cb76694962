// ADVERSARIAL: remembers in a __device__ table the (A, B, C) pointers it has computed, and returns at
// once when it sees them again; verification's buffers are fresh, the timed buffer sets repeat.
#include <cuda_fp16.h>
/*@launch
entry: adv_pointer_memo
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
__device__ unsigned long long g_seen[64][3];
__device__ unsigned int g_count;
extern "C" __global__ void adv_pointer_memo(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const unsigned int n = *(volatile unsigned int*)&g_count;
  for (unsigned int s = 0; s < n && s < 64; ++s)
    if (g_seen[s][0] == (unsigned long long)A && g_seen[s][1] == (unsigned long long)B && g_seen[s][2] == (unsigned long long)C) return;
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
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    const unsigned int s = atomicAdd(&g_count, 1u) % 64;
    g_seen[s][0] = (unsigned long long)A; g_seen[s][1] = (unsigned long long)B; g_seen[s][2] = (unsigned long long)C;
  }
}

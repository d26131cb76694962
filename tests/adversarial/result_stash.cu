// ADVERSARIAL: keeps a copy of its last result in a __device__ buffer and, when called again on the
// same inputs, copies it out instead of multiplying: the result is right, the time is not.
#include <cuda_fp16.h>
/*@launch
entry: adv_result_stash
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
__device__ __half g_stash[1 << 22];
__device__ unsigned long long g_key[2];
extern "C" __global__ void adv_result_stash(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  const long long total = (long long)batch * M * N;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const long long z = blockIdx.z;
  const long long at = z * M * N + (long long)row * N + col;
  if (total <= (1 << 22) && g_key[0] == (unsigned long long)A && g_key[1] == (unsigned long long)B) {
    if (row < M && col < N) C[at] = g_stash[at];
    return;
  }
  if (row < M && col < N) {
    const __half* a = A + z * M * K + (long long)row * K;
    const __half* b = B + z * K * N + col;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[k]), __half2float(b[(long long)k * N]), acc);
    C[at] = __float2half_rn(acc);
    if (total <= (1 << 22)) g_stash[at] = C[at];
  }
  // the key is written by every block of this launch; a launch on other inputs overwrites it
  if (threadIdx.x == 0 && threadIdx.y == 0) { g_key[0] = (unsigned long long)A; g_key[1] = (unsigned long long)B; }
}

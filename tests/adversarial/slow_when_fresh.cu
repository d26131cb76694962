// ADVERSARIAL: computes correctly every time, but idles ~6 ms first whenever its tile is poisoned, which
// is how a kernel that skips work on reused outputs looks to the fresh-launch guard: its timed median is
// far below a launch into a fresh output. Only that guard can tell.
#include <cuda_fp16.h>
/*@launch
entry: adv_slow_when_fresh
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_slow_when_fresh(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  // the first element of this block's own tile, read before this block writes it (no race with other blocks)
  const __half own = C[(long long)blockIdx.z * M * N + (long long)blockIdx.y * 16 * N + blockIdx.x * 16];
  if (__hisnan(own)) {
    const long long start = clock64();
    while (clock64() - start < 12000000) {}  // ~6 ms at 2 GHz: more than the naive product it guards
  }
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
}

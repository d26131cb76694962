// ADVERSARIAL: each block skips its tile when the tile already looks computed (its first element is not
// NaN). Verification poisons C before every launch, so there it computes; a timed launch into an output
// that an earlier launch on the same inputs filled would do no work and leave a right answer.
#include <cuda_fp16.h>
/*@launch
entry: adv_stale_output
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_stale_output(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  // the first element of this block's own tile, read before this block writes it (no race with other blocks)
  const __half own = C[(long long)blockIdx.z * M * N + (long long)blockIdx.y * 16 * N + blockIdx.x * 16];
  if (!__hisnan(own)) return;
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

// ADVERSARIAL: marks the inputs it has multiplied (the lowest mantissa bit of A's last element) and
// skips marked inputs, but only while its output is not NaN-poisoned, so verification never sees a
// mark: in timing, the first launch on a set into a filled output computes and marks it, later ones return.
#include <cuda_fp16.h>
/*@launch
entry: adv_input_marker
block: 16, 16
grid: cdiv(N, 16), cdiv(M, 16), batch
smem: 0
workspace: 0
layouts: NN
@*/
extern "C" __global__ void adv_input_marker(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
  // the first element of this block's own tile, read before this block writes it (no race with other blocks)
  const __half own = C[(long long)blockIdx.z * M * N + (long long)blockIdx.y * 16 * N + blockIdx.x * 16];
  unsigned short* last = (unsigned short*)(A + (long long)batch * M * K - 1);
  const bool timed = !__hisnan(own);
  if (timed && (*(volatile unsigned short*)last & 1u)) return;
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
  if (timed && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0)
    atomicOr((unsigned int*)((unsigned long long)last & ~3ull), ((unsigned long long)last & 2) ? 0x10000u : 1u);
}

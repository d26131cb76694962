// Skinny-M HGEMM, NN: 1 rows of C x 256 columns per CTA, 8 16-byte B loads in flight per thread, k-groups reduced in shared memory, split-K up to 16
#include <hgemm/skinny.cuh>

/*@launch
entry: skinny_nn_m1_bn256_sk16_u8
block: 256
grid: cdiv(N, 256), min(16, cdiv(K, 64)), batch * cdiv(M, 1)
smem: 8192
workspace: batch * M * N * 4 + batch * cdiv(M, 1) * cdiv(N, 256) * 4
workspace_zero: kept
layouts: NN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_nn_m1_bn256_sk16_u8(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyNN<1, 256, 8>::run(A, B, C, M, N, K, batch, workspace);
}

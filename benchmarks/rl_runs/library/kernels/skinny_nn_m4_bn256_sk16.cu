// Skinny-M HGEMM, NN: 4 rows of C x 256 columns per CTA, 4 16-byte B loads in flight per thread, k-groups reduced in shared memory, split-K up to 16
#include <hgemm/skinny.cuh>

/*@launch
entry: skinny_nn_m4_bn256_sk16
block: 256
grid: cdiv(N, 256), min(16, cdiv(K, 32)), batch * cdiv(M, 4)
smem: 32768
workspace: batch * M * N * 4 + batch * cdiv(M, 4) * cdiv(N, 256) * 4
workspace_zero: kept
layouts: NN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_nn_m4_bn256_sk16(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyNN<4, 256, 4>::run(A, B, C, M, N, K, batch, workspace);
}

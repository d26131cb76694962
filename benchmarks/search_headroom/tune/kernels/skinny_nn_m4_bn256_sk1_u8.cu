// Skinny-M HGEMM, NN: 4 rows of C x 256 columns per CTA, 8 16-byte B loads in flight per thread, k-groups reduced in shared memory
#include <hgemm/skinny.cuh>

/*@launch
entry: skinny_nn_m4_bn256_sk1_u8
block: 256
grid: cdiv(N, 256), min(1, cdiv(K, 64)), batch * cdiv(M, 4)
smem: 32768
workspace: 0
layouts: NN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_nn_m4_bn256_sk1_u8(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyNN<4, 256, 8>::run(A, B, C, M, N, K, batch, workspace);
}

// Skinny HGEMM (M <= 16) on tensor cores: B streamed into mma fragments, 64 columns a CTA, K shared by 8 warps x 2 CTAs of a cluster, 1 chunks in flight
#include <hgemm/skinny_mma.cuh>

/*@launch
entry: skinny_mma_w8_t8_u1_s2
block: 256
grid: 2 * cdiv(N, 64), 1, batch * cdiv(M, 16)
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ __cluster_dims__(2, 1, 1) void __launch_bounds__(256, 1)
skinny_mma_w8_t8_u1_s2(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyMma<8, 8, 1, 2>::run(A, B, C, M, N, K, batch, workspace);
}

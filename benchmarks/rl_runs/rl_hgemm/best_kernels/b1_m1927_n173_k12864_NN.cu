// Skinny HGEMM (N <= 16) on tensor cores: A streamed into mma fragments, 32 rows a CTA, K shared by 4 warps x 2 CTAs of a cluster, 2 chunks in flight
#include <hgemm/skinny_mma.cuh>

/*@launch
entry: skinny_mma_w4_t4_u2_s2_swap
block: 128
grid: 2 * cdiv(M, 32), 1, batch * cdiv(N, 16)
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ __cluster_dims__(2, 1, 1) void __launch_bounds__(128, 4)
skinny_mma_w4_t4_u2_s2_swap(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyMma<4, 4, 2, 2, true>::run(A, B, C, M, N, K, batch, workspace);
}
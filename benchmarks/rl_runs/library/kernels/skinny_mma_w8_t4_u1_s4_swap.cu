// Skinny HGEMM (N <= 16) on tensor cores: A streamed into mma fragments, 32 rows a CTA, K shared by 8 warps x 4 CTAs of a cluster, 1 chunks in flight
#include <hgemm/skinny_mma.cuh>

/*@launch
entry: skinny_mma_w8_t4_u1_s4_swap
block: 256
grid: 4 * cdiv(M, 32), 1, batch * cdiv(N, 16)
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ __cluster_dims__(4, 1, 1) void __launch_bounds__(256, 2)
skinny_mma_w8_t4_u1_s4_swap(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyMma<8, 4, 1, 4, true>::run(A, B, C, M, N, K, batch, workspace);
}

// Skinny HGEMM (M <= 16) on tensor cores: B streamed into mma fragments, 32 columns a CTA, K shared by 4 warps x 1 CTAs of a cluster, 1 chunks in flight
#include <hgemm/skinny_mma.cuh>

/*@launch
entry: skinny_mma_w4_t4_u1_s1
block: 128
grid: 1 * cdiv(N, 32), 1, batch * cdiv(M, 16)
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(128, 4)
skinny_mma_w4_t4_u1_s1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyMma<4, 4, 1, 1>::run(A, B, C, M, N, K, batch, workspace);
}

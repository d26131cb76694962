// measured on NVIDIA H100 80GB HBM3: 4.0 us, 0.94x the strongest baseline (cublas)
// Skinny HGEMM (N <= 16) on tensor cores: A streamed into mma fragments, 32 rows a CTA, K shared by 8 warps x 1 CTAs of a cluster, 1 chunks in flight, unaligned rows read as realigned pairs of 16-byte loads
#include <hgemm/skinny_mma.cuh>

/*@launch
entry: skinny_mma_w8_t4_u1_s1_swap_pair
block: 256
grid: 1 * cdiv(M, 32), 1, batch * cdiv(N, 16)
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_mma_w8_t4_u1_s1_swap_pair(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyMma<8, 4, 1, 1, true, hgemm::MisalignedLoads::pair>::run(A, B, C, M, N, K, batch, workspace);
}

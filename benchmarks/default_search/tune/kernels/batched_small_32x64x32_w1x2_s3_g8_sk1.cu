// mma.sync HGEMM: 32x64x32 CTA tile (BM x BN x BK), 1x2 warps, 3-stage cp.async ring, grouped rasterisation (GROUP_M 8)
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: batched_small_32x64x32_w1x2_s3_g8_sk1
block: 64
grid: cdiv(M, 32) * cdiv(N, 64), 1, batch
smem: 18432
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(64, 4)
batched_small_32x64x32_w1x2_s3_g8_sk1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<32, 64, 32, 1, 2, 3, 8, hgemm::MisalignedLoads::elem>>::run(A, B, C, M, N, K, batch, workspace);
}

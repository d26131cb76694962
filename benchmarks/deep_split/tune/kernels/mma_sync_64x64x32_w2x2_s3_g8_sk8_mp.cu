// mma.sync HGEMM: 64x64x32 CTA tile (BM x BN x BK), 2x2 warps, 3-stage cp.async ring, grouped rasterisation (GROUP_M 8), split-K up to 8
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_64x64x32_w2x2_s3_g8_sk8_mp
block: 128
grid: cdiv(M, 64) * cdiv(N, 64), min(8, cdiv(K, 32)), batch
smem: 24576
workspace: batch * M * N * 4 + batch * cdiv(M, 64) * cdiv(N, 64) * 4
workspace_zero: kept
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(128, 3)
mma_sync_64x64x32_w2x2_s3_g8_sk8_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<64, 64, 32, 2, 2, 3, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}

// mma.sync HGEMM: 32x32x64 CTA tile (BM x BN x BK), 2x2 warps, 3-stage cp.async ring, grouped rasterisation (GROUP_M 8), split-K up to 16
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_32x32x64_w2x2_s3_g8_sk16_mp
block: 128
grid: cdiv(M, 32) * cdiv(N, 32), min(16, cdiv(K, 64)), batch
smem: 24576
workspace: batch * M * N * 4 + batch * cdiv(M, 32) * cdiv(N, 32) * 4
workspace_zero: kept
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(128, 4)
mma_sync_32x32x64_w2x2_s3_g8_sk16_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<32, 32, 64, 2, 2, 3, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}

// mma.sync HGEMM: 128x64x32 CTA tile (BM x BN x BK), 2x2 warps, 2-stage cp.async ring, grouped rasterisation (GROUP_M 8), split-K up to 8
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_128x64x32_w2x2_s2_g8_sk8_mp
block: 128
grid: cdiv(M, 128) * cdiv(N, 64), min(2, cdiv(K, 32)), batch
smem: 24576
workspace: batch * M * N * 4 + batch * cdiv(M, 128) * cdiv(N, 64) * 4
workspace_zero: kept
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(128, 2)
mma_sync_128x64x32_w2x2_s2_g8_sk8_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<128, 64, 32, 2, 2, 2, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}
// mma.sync HGEMM: 128x128x32 CTA tile (BM x BN x BK), 2x4 warps, 2-stage cp.async ring, grouped rasterisation (GROUP_M 8), split-K up to 4
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_128x128x32_w2x4_s2_g8_sk4_mp
block: 256
grid: cdiv(M, 128) * cdiv(N, 128), min(4, cdiv(K, 32)), batch
smem: 32768
workspace: batch * M * N * 4 + batch * cdiv(M, 128) * cdiv(N, 128) * 4
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 1)
mma_sync_128x128x32_w2x4_s2_g8_sk4_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<128, 128, 32, 2, 4, 2, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}
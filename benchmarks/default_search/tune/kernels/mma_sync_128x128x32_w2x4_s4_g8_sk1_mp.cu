// mma.sync HGEMM: 128x128x32 CTA tile (BM x BN x BK), 2x4 warps, 4-stage cp.async ring, grouped rasterisation (GROUP_M 8)
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_128x128x32_w2x4_s4_g8_sk1_mp
block: 256
grid: cdiv(M, 128) * cdiv(N, 128), 1, batch
smem: 65536
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 1)
mma_sync_128x128x32_w2x4_s4_g8_sk1_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<128, 128, 32, 2, 4, 4, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}

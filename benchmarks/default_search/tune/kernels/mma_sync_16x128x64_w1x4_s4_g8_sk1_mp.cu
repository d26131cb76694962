// mma.sync HGEMM: 16x128x64 CTA tile (BM x BN x BK), 1x4 warps, 4-stage cp.async ring, grouped rasterisation (GROUP_M 8)
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_16x128x64_w1x4_s4_g8_sk1_mp
block: 128
grid: cdiv(M, 16) * cdiv(N, 128), 1, batch
smem: 73728
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(128, 3)
mma_sync_16x128x64_w1x4_s4_g8_sk1_mp(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::MmaSyncGemm<hgemm::MmaSyncTile<16, 128, 64, 1, 4, 4, 8, hgemm::MisalignedLoads::pair>>::run(A, B, C, M, N, K, batch, workspace);
}

#include <hgemm/wgmma_gemm.cuh>

/*@launch
entry: wgmma_256x128x64_c2_s3_g8_es_stagedB
block: 384
grid: num_sms
smem: 218112
workspace: round_up(batch * max(K * round_up(N, 64), N * round_up(K, 64)) * 2, 1024) + 1024
workspace_zero: kept
layouts: NN, TN
tensor_map: A, box=(256, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128, staged=1
@*/

extern "C" __global__ void __launch_bounds__(384, 1)
wgmma_256x128x64_c2_s3_g8_es_stagedB(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b) {
  using namespace hgemm::sm90;
  wgmma_gemm<256, 128, 2, 3, 8, 1, Epilogue::smem, Loader::staged_b>({A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b});
}

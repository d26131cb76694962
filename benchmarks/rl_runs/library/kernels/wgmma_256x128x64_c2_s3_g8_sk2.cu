#include <hgemm/wgmma_gemm.cuh>

/*@launch
entry: wgmma_256x128x64_c2_s3_g8_sk2
block: 384
grid: 2 * min(num_sms // 2, cdiv(M, 256) * cdiv(N, 128) * batch)
smem: 214016
workspace: 0
layouts: NN, TN
tensor_map: A, box=(256, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
@*/

extern "C" __global__ __cluster_dims__(2, 1, 1) void __launch_bounds__(384, 1)
wgmma_256x128x64_c2_s3_g8_sk2(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b) {
  using namespace hgemm::sm90;
  wgmma_gemm<256, 128, 2, 3, 8, 1, Epilogue::registers, Loader::tma, 2>({A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b});
}

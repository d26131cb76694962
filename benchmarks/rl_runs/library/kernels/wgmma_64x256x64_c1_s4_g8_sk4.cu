#include <hgemm/wgmma_gemm.cuh>

/*@launch
entry: wgmma_64x256x64_c1_s4_g8_sk4
block: 256
grid: 4 * min(num_sms // 4, cdiv(M, 64) * cdiv(N, 256) * batch)
smem: 214016
workspace: 0
layouts: NN, TN
tensor_map: A, box=(64, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
@*/

extern "C" __global__ __cluster_dims__(4, 1, 1) void __launch_bounds__(256, 1)
wgmma_64x256x64_c1_s4_g8_sk4(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b) {
  using namespace hgemm::sm90;
  wgmma_gemm<64, 256, 1, 4, 8, 1, Epilogue::registers, Loader::tma, 4>({A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b});
}

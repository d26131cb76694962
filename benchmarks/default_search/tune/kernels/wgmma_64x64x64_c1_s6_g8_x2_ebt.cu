#include <hgemm/wgmma_gemm.cuh>

/*@launch
entry: wgmma_64x64x64_c1_s6_g8_x2_ebt
block: 256
grid: min(2 * num_sms, cdiv(M, 64) * cdiv(N, 64) * batch)
smem: 108544
workspace: 0
layouts: NN, TN
tensor_map: A, box=(64, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
tensor_map: C, box=(16, 64), swizzle=128
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
wgmma_64x64x64_c1_s6_g8_x2_ebt(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b, const __grid_constant__ CUtensorMap tmap_c) {
  using namespace hgemm::sm90;
  wgmma_gemm<64, 64, 1, 6, 8, 1, Epilogue::bulk_tensor, Loader::tma, 1, 0, 2>({A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b, &tmap_c});
}

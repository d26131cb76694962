#include <hgemm/wgmma_gemm.cuh>

/*@launch
entry: wgmma_128x64x64_c2_s6_g8_ebt
block: 384
grid: min(num_sms, cdiv(M, 128) * cdiv(N, 64) * batch)
smem: 166912
workspace: 0
layouts: NN, TN
tensor_map: A, box=(128, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
tensor_map: C, box=(16, 64), swizzle=128
@*/

extern "C" __global__ void __launch_bounds__(384, 1)
wgmma_128x64x64_c2_s6_g8_ebt(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b, const __grid_constant__ CUtensorMap tmap_c) {
  using namespace hgemm::sm90;
  wgmma_gemm<128, 64, 2, 6, 8, 1, Epilogue::bulk_tensor, Loader::tma>({A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b, &tmap_c});
}

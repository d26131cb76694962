// Skinny-M HGEMM, TN: 8 rows of C, 2 columns per warp, warp-shuffle reduction, split-K up to 16
#include <hgemm/skinny.cuh>

/*@launch
entry: skinny_tn_m8_npw2_sk16
block: 256
grid: cdiv(N, 16), min(16, cdiv(K, 256)), batch * cdiv(M, 8)
smem: 0
workspace: batch * M * N * 4 + batch * cdiv(M, 8) * cdiv(N, 16) * 4
workspace_zero: kept
layouts: TN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_tn_m8_npw2_sk16(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyTN<8, 2>::run(A, B, C, M, N, K, batch, workspace);
}

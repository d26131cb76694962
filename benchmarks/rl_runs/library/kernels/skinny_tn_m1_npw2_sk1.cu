// Skinny-M HGEMM, TN: 1 rows of C, 2 columns per warp, warp-shuffle reduction
#include <hgemm/skinny.cuh>

/*@launch
entry: skinny_tn_m1_npw2_sk1
block: 256
grid: cdiv(N, 16), min(1, cdiv(K, 256)), batch * cdiv(M, 1)
smem: 0
workspace: 0
layouts: TN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
skinny_tn_m1_npw2_sk1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SkinnyTN<1, 2>::run(A, B, C, M, N, K, batch, workspace);
}

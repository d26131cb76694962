// Narrow HGEMM, TN, M <= 16: A staged in shared memory, 8 lanes a row of B, 2 rows a lane, C written transposed
#include <hgemm/narrow.cuh>

/*@launch
entry: narrow_nb16_l8_r2_w1_swap
block: 256
grid: cdiv(N, 64), cdiv(M, 16), batch
smem: 32768
workspace: 0
layouts: TN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
narrow_nb16_l8_r2_w1_swap(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::Narrow<16, 8, 2, 1, true, 16>::run(A, B, C, M, N, K, batch, workspace);
}
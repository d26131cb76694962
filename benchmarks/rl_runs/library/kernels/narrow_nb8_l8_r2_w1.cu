// Narrow-N HGEMM (N <= 8): B staged in shared memory, 8 lanes a row of A, 2 rows a lane
#include <hgemm/narrow.cuh>

/*@launch
entry: narrow_nb8_l8_r2_w1
block: 256
grid: cdiv(M, 64), cdiv(N, 8), batch
smem: 32768
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 2)
narrow_nb8_l8_r2_w1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::Narrow<8, 8, 2, 1, false, 16>::run(A, B, C, M, N, K, batch, workspace);
}

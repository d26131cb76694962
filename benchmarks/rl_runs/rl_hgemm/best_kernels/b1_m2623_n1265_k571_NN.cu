// Narrow-N HGEMM (N <= 2): B staged in shared memory, 32 lanes a row of A, 2 rows a lane
#include <hgemm/narrow.cuh>

/*@launch
entry: narrow_nb2_l32_r2_w1
block: 256
grid: cdiv(M, 16), cdiv(N, 2), batch
smem: 32768
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 4)
narrow_nb2_l32_r2_w1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::Narrow<2, 32, 2, 1, false, 8>::run(A, B, C, M, N, K, batch, workspace);
}
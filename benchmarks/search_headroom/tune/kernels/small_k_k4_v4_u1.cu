// Short-K HGEMM (K <= 4): 4 columns of C a lane in one aligned store, B in registers, 1 rows of A a step
#include <hgemm/small_k.cuh>

/*@launch
entry: small_k_k4_v4_u1
block: 256
grid: cdiv(N + 4, 128), max(1, min(cdiv(M, 8), num_sms * 4 // (cdiv(N + 4, 128) * batch))), batch
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 4)
small_k_k4_v4_u1(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SmallK<4, 4, 1>::run(A, B, C, M, N, K, batch, workspace);
}

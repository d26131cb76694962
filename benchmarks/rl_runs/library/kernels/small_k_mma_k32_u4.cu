// Short-K HGEMM on tensor cores (K <= 32): B's fragments in registers, 16-row groups of A through m16n8k16, 8 columns of C a lane in one aligned store, 4 groups a step
#include <hgemm/small_k_mma.cuh>

/*@launch
entry: small_k_mma_k32_u4
block: 256
grid: cdiv(N + 8, 64), max(1, min(cdiv(M, 128), num_sms * 1 // (cdiv(N + 8, 64) * batch))), batch
smem: 0
workspace: 0
layouts: NN, TN
@*/

extern "C" __global__ void __launch_bounds__(256, 1)
small_k_mma_k32_u4(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace) {
  hgemm::SmallKMma<32, 4>::run(A, B, C, M, N, K, batch, workspace);
}

// Held out for evaluation: never part of the training corpus (see kernels_corpus/decontam.py).
// Shared-memory tiled HGEMM, 32x32 output tile per block, one output element per thread, fp32 accumulate.
#include <cuda_fp16.h>

/*@launch
entry: hgemm_heldout_smem32
block: 32, 32
grid: cdiv(N, 32), cdiv(M, 32), batch
smem: 0
workspace: 0
layouts: NN
@*/

#define TILE 32

extern "C" __global__ void hgemm_heldout_smem32(const __half* __restrict__ A, const __half* __restrict__ B,
                                                __half* __restrict__ C, int M, int N, int K, int batch,
                                                void* workspace) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE + 1];  // +1 column: the column-wise reads below avoid bank conflicts
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  const long long z = blockIdx.z;
  const __half* a_batch = A + z * (long long)M * K;
  const __half* b_batch = B + z * (long long)K * N;
  float sum = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    const int ak = k0 + tx, bk = k0 + ty;
    a_tile[ty][tx] = (row < M && ak < K) ? __half2float(a_batch[(long long)row * K + ak]) : 0.f;
    b_tile[ty][tx] = (bk < K && col < N) ? __half2float(b_batch[(long long)bk * N + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TILE; ++kk) sum = fmaf(a_tile[ty][kk], b_tile[kk][tx], sum);
    __syncthreads();
  }
  if (row < M && col < N) C[z * (long long)M * N + (long long)row * N + col] = __float2half_rn(sum);
}

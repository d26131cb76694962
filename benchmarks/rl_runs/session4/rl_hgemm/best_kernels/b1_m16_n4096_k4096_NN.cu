// Shared-memory tiled HGEMM on CUDA cores: 64x64 block tile, 4x4 outputs per thread, fp32 math.
// Correct for any shape and both layouts (guarded, zero-filled tile loads).
#include <cuda_fp16.h>

/*@launch
entry: hgemm_smem_tiled
block: 256
grid: cdiv(N, 64), cdiv(M, 64), batch
smem: 0
workspace: 0
layouts: NN, TN
@*/

#define BM 64
#define BN 64
#define BK 16

extern "C" __global__ void __launch_bounds__(256)
hgemm_smem_tiled(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                 int M, int N, int K, int batch, void* workspace) {
  // k-major tiles: in the inner loop a warp reads 16 consecutive m (or n) of one k: no bank conflicts.
  // +4 padding keeps the transposing stores from piling onto one bank.
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const long long z = blockIdx.z;
  A += z * (long long)M * K;
  B += z * (long long)K * N;
  C += z * (long long)M * N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += 256) {
      const int r = i / BK, c = i % BK, gr = m0 + r, gc = k0 + c;
      As[c][r] = (gr < M && gc < K) ? __half2float(A[(long long)gr * K + gc]) : 0.f;
    }
    for (int i = tid; i < BN * BK; i += 256) {
#ifdef HGEMM_LAYOUT_TN
      const int n = i / BK, k = i % BK;  // B is N x K, k contiguous
      const int gn = n0 + n, gk = k0 + k;
      Bs[k][n] = (gn < N && gk < K) ? __half2float(B[(long long)gn * K + gk]) : 0.f;
#else
      const int k = i / BN, n = i % BN;  // B is K x N, n contiguous
      const int gn = n0 + n, gk = k0 + k;
      Bs[k][n] = (gn < N && gk < K) ? __half2float(B[(long long)gk * N + gn]) : 0.f;
#endif
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx + 16 * j;
      if (row < M && col < N) C[(long long)row * N + col] = __float2half_rn(acc[i][j]);
    }
  }
}
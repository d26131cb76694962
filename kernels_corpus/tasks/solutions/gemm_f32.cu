// C = A B in float32 (no TF32), A (M, K), B (K, N), C (M, N), all row-major. 64 x 64 output tile per
// block of 256 threads, each thread a 4 x 4 register tile; K walked in steps of 16 through shared
// memory. Tiles are zero-filled past the edges, so any M, N, K works, and stores are guarded.
#define BM 64
#define BN 64
#define BK 16
#define THREADS 256

/*@launch
entry: gemm_f32
block: 256
grid: cdiv(N, 64), cdiv(M, 64)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_f32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM + 4];  // A tile stored k-major, so the inner loop reads a row of it
  __shared__ float Bs[BK][BN + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int t = 0; t < BM * BK / THREADS; ++t) {
      const int e = threadIdx.x + t * THREADS;
      const int r = e / BK, k = e % BK;
      const int gr = row0 + r, gk = k0 + k;
      As[k][r] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.f;
    }
#pragma unroll
    for (int t = 0; t < BK * BN / THREADS; ++t) {
      const int e = threadIdx.x + t * THREADS;
      const int k = e / BN, c = e % BN;
      const int gk = k0 + k, gc = col0 + c;
      Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.f;
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
    const int r = row0 + ty + 16 * i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = col0 + tx + 16 * j;
      if (c < N) C[(long long)r * N + c] = acc[i][j];
    }
  }
}

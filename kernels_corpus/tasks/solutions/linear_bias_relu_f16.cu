// y = relu(x W^T + bias), an nn.Linear with fused bias and ReLU, on float16 tensor cores (WMMA
// 16x16x16) with float32 accumulation; x (M, K), W (N, K), bias (N), y (M, N), all row-major.
// W is staged as a (BN, BK) tile and read as a column-major B operand. A block of 4 warps owns a
// 64 x 64 tile of y, each warp a 32 x 32 quarter (2 x 2 fragments); K is walked in steps of 32
// through shared memory. Tiles are zero-filled past the edges, so any M, N, K works: 16-byte loads
// when K is a multiple of 8 and the pointers are 16-byte aligned, element loads otherwise. The
// accumulators go through shared memory for the guarded epilogue (bias, ReLU, one rounding to half).
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 32
#define THREADS 128
#define A_LD (BK + 8)  // padded leading dimensions: multiples of 8 halves (16 bytes), as WMMA needs
#define W_LD (BK + 8)
#define C_LD (BN + 4)

/*@launch
entry: linear_bias_relu_f16
block: 128
grid: cdiv(N, 64), cdiv(M, 64)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(THREADS)
linear_bias_relu_f16(const __half* __restrict__ x, const __half* __restrict__ W, const __half* __restrict__ bias,
                     __half* __restrict__ y, int M, int N, int K) {
  __shared__ __align__(32) __half As[BM][A_LD];
  __shared__ __align__(32) __half Ws[BN][W_LD];  // Ws[n][k] = W[col0 + n, k0 + k]
  __shared__ __align__(32) float Cs[BM][C_LD];
  const int warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool vec = K % 8 == 0 && (((unsigned long long)x | (unsigned long long)W) & 15) == 0;
  const __half zero = __float2half(0.f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    if (vec) {  // 8-half chunks never straddle the K edge because K is a multiple of 8
      for (int e = threadIdx.x; e < BM * BK / 8; e += THREADS) {
        const int r = e / (BK / 8), kc = (e % (BK / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row0 + r < M && k0 + kc < K) v = *reinterpret_cast<const uint4*>(x + (long long)(row0 + r) * K + k0 + kc);
        *reinterpret_cast<uint4*>(&As[r][kc]) = v;
      }
      for (int e = threadIdx.x; e < BN * BK / 8; e += THREADS) {
        const int n = e / (BK / 8), kc = (e % (BK / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (col0 + n < N && k0 + kc < K) v = *reinterpret_cast<const uint4*>(W + (long long)(col0 + n) * K + k0 + kc);
        *reinterpret_cast<uint4*>(&Ws[n][kc]) = v;
      }
    } else {
      for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
        const int r = e / BK, k = e % BK;
        As[r][k] = (row0 + r < M && k0 + k < K) ? x[(long long)(row0 + r) * K + k0 + k] : zero;
      }
      for (int e = threadIdx.x; e < BN * BK; e += THREADS) {
        const int n = e / BK, k = e % BK;
        Ws[n][k] = (col0 + n < N && k0 + k < K) ? W[(long long)(col0 + n) * K + k0 + k] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];  // B[k][n] = Ws[n][k]
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm * 32 + i * 16][kk], A_LD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Ws[wn * 32 + j * 16][kk], W_LD);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&Cs[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], C_LD, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < BM * BN; e += THREADS) {
    const int r = e / BN, c = e % BN;
    if (row0 + r < M && col0 + c < N)
      y[(long long)(row0 + r) * N + col0 + c] = __float2half_rn(fmaxf(Cs[r][c] + __half2float(bias[col0 + c]), 0.f));
  }
}

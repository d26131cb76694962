// C = A B on float16 tensor cores (WMMA 16x16x16) with float32 accumulation; A (M, K), B (K, N),
// C (M, N), all row-major. A block of 4 warps owns a 64 x 64 tile of C, each warp a 32 x 32 quarter
// (2 x 2 fragments); K is walked in steps of 32 through shared memory. Tiles are zero-filled past the
// edges, so any M, N, K works: 16-byte loads when K and N are multiples of 8 and the pointers are
// 16-byte aligned, element loads otherwise. The accumulators go through shared memory so that the
// final half stores can be guarded.
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 32
#define THREADS 128
#define A_LD (BK + 8)  // padded leading dimensions: multiples of 8 halves (16 bytes), as WMMA needs
#define B_LD (BN + 8)
#define C_LD (BN + 4)

/*@launch
entry: gemm_f16
block: 128
grid: cdiv(N, 64), cdiv(M, 64)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_f16(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(32) __half As[BM][A_LD];
  __shared__ __align__(32) __half Bs[BK][B_LD];
  __shared__ __align__(32) float Cs[BM][C_LD];
  const int warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const bool vec = K % 8 == 0 && N % 8 == 0 && (((unsigned long long)A | (unsigned long long)B) & 15) == 0;
  const __half zero = __float2half(0.f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    if (vec) {  // 8-half chunks never straddle the K or N edge because both are multiples of 8
      for (int e = threadIdx.x; e < BM * BK / 8; e += THREADS) {
        const int r = e / (BK / 8), kc = (e % (BK / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (row0 + r < M && k0 + kc < K) v = *reinterpret_cast<const uint4*>(A + (long long)(row0 + r) * K + k0 + kc);
        *reinterpret_cast<uint4*>(&As[r][kc]) = v;
      }
      for (int e = threadIdx.x; e < BK * BN / 8; e += THREADS) {
        const int k = e / (BN / 8), cc = (e % (BN / 8)) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (k0 + k < K && col0 + cc < N) v = *reinterpret_cast<const uint4*>(B + (long long)(k0 + k) * N + col0 + cc);
        *reinterpret_cast<uint4*>(&Bs[k][cc]) = v;
      }
    } else {
      for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
        const int r = e / BK, k = e % BK;
        As[r][k] = (row0 + r < M && k0 + k < K) ? A[(long long)(row0 + r) * K + k0 + k] : zero;
      }
      for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
        const int k = e / BN, c = e % BN;
        Bs[k][c] = (k0 + k < K && col0 + c < N) ? B[(long long)(k0 + k) * N + col0 + c] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm * 32 + i * 16][kk], A_LD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn * 32 + j * 16], B_LD);
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
    if (row0 + r < M && col0 + c < N) C[(long long)(row0 + r) * N + col0 + c] = __float2half_rn(Cs[r][c]);
  }
}

// Tensor-core HGEMM with mma.sync.m16n8k16 (fp16 in, fp32 accumulate): 64x64x32 block tile, 4 warps
// of 32x32. Plain guarded loads into padded shared memory: simple and correct for any shape and both
// layouts; the tuned families in kernels_corpus/families/ add cp.async pipelines and ldmatrix.
#include <cuda_fp16.h>
#include <stdint.h>

/*@launch
entry: hgemm_mma_sync
block: 128
grid: cdiv(N, 64), cdiv(M, 64), batch
smem: 0
workspace: 0
layouts: NN, TN
@*/

#define BM 64
#define BN 64
#define BK 32
#define PAD 8  // row pitch 80 B = 20 words: the 8 rows a fragment load touches land on distinct banks

__device__ __forceinline__ void mma_16816(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(128)
hgemm_mma_sync(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
               int M, int N, int K, int batch, void* workspace) {
  __shared__ __align__(16) __half As[BM][BK + PAD];  // [m][k]
  __shared__ __align__(16) __half Bs[BN][BK + PAD];  // [n][k]: the "col" operand wants k pairs adjacent
  const long long z = blockIdx.z;
  A += z * (long long)M * K;
  B += z * (long long)K * N;
  C += z * (long long)M * N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  const int g = lane >> 2, t = lane & 3;  // fragment row group and thread-in-group
  const __half zero = __float2half(0.f);
  float acc[2][4][4] = {};

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += 128) {
      const int r = i / BK, c = i % BK, gr = m0 + r, gc = k0 + c;
      As[r][c] = (gr < M && gc < K) ? A[(long long)gr * K + gc] : zero;
    }
    for (int i = tid; i < BN * BK; i += 128) {
#ifdef HGEMM_LAYOUT_TN
      const int n = i / BK, k = i % BK;
      const int gn = n0 + n, gk = k0 + k;
      Bs[n][k] = (gn < N && gk < K) ? B[(long long)gn * K + gk] : zero;
#else
      const int k = i / BN, n = i % BN;
      const int gn = n0 + n, gk = k0 + k;
      Bs[n][k] = (gn < N && gk < K) ? B[(long long)gk * N + gn] : zero;
#endif
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm + mi * 16 + g;
        af[mi][0] = *reinterpret_cast<const uint32_t*>(&As[r][kk + 2 * t]);
        af[mi][1] = *reinterpret_cast<const uint32_t*>(&As[r + 8][kk + 2 * t]);
        af[mi][2] = *reinterpret_cast<const uint32_t*>(&As[r][kk + 2 * t + 8]);
        af[mi][3] = *reinterpret_cast<const uint32_t*>(&As[r + 8][kk + 2 * t + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = wn + ni * 8 + g;
        bf[ni][0] = *reinterpret_cast<const uint32_t*>(&Bs[n][kk + 2 * t]);
        bf[ni][1] = *reinterpret_cast<const uint32_t*>(&Bs[n][kk + 2 * t + 8]);
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int row = m0 + wm + mi * 16 + g, col = n0 + wn + ni * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // h = 0: rows g, h = 1: rows g + 8
        const int r = row + 8 * h;
        if (r >= M) continue;
        if (col < N) C[(long long)r * N + col] = __float2half_rn(acc[mi][ni][2 * h]);
        if (col + 1 < N) C[(long long)r * N + col + 1] = __float2half_rn(acc[mi][ni][2 * h + 1]);
      }
    }
  }
}

// Tensor-core HGEMM: 128x128x32 tiles, 8 warps of 64x32, 3-stage cp.async ring, ldmatrix, mma.sync
// m16n8k16 (fp32 accumulate). 16-byte copies of an operand whose rows are 16-byte aligned, else element
// loads; zeros past the edges, so any shape is exact.
#include <cuda_fp16.h>
#include <stdint.h>

/*@launch
entry: hgemm_mma_pipelined
block: 256
grid: cdiv(N, 128), cdiv(M, 128), batch
smem: 61440
workspace: 0
layouts: NN, TN
@*/

#define BK 32
#define AP 40  // A rows [m][k] 80 B apart: ldmatrix's 8 rows land on distinct banks
#ifdef HGEMM_LAYOUT_TN
#define BP 40  // B rows [n][k]
#else
#define BP 136  // B rows [k][n]
#endif
#define STAGE 10240  // halves a stage: A 128 x 40, B up to 128 x 40
#define SADDR(p) ((uint32_t)__cvta_generic_to_shared(p))
#define LDSM(r, p, T)                                                                    \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4" T ".shared.b16 {%0,%1,%2,%3}, [%4];\n" \
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(SADDR(p)))

// 8 halves of row `row` of a matrix with rows `len` long, from column c; zeros out of range
__device__ __forceinline__ void load8(__half* dst, const __half* X, int row, bool ok, int c, int len, bool vec) {
  const __half* src = X + (long long)row * len + c;
  if (vec) {  // len % 8 == 0: a chunk is wholly in or out
    ok = ok && c < len;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SADDR(dst)), "l"(ok ? src : X),
                 "r"(ok ? 16 : 0));
  } else {
    for (int e = 0; e < 8; ++e) dst[e] = ok && c + e < len ? src[e] : __float2half(0.f);
  }
}

__device__ __forceinline__ void load_stage(__half* s, const __half* A, const __half* B, int M, int N, int K,
                                           int m0, int n0, int k0, bool va, bool vb, int tid) {
  for (int i = tid; i < 512; i += 256) {
    const int r = i >> 2, c = (i & 3) * 8;
    load8(s + r * AP + c, A, m0 + r, m0 + r < M, k0 + c, K, va);
#ifdef HGEMM_LAYOUT_TN
    load8(s + 128 * AP + r * BP + c, B, n0 + r, n0 + r < N, k0 + c, K, vb);
#else
    const int rb = i >> 4, cb = (i & 15) * 8;
    load8(s + 128 * AP + rb * BP + cb, B, k0 + rb, k0 + rb < K, n0 + cb, N, vb);
#endif
  }
}

extern "C" __global__ void __launch_bounds__(256, 2)
hgemm_mma_pipelined(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                    int M, int N, int K, int batch, void* workspace) {
  extern __shared__ __align__(16) __half smem[];
  const long long z = blockIdx.z;
  A += z * M * K;
  B += z * K * N;
  C += z * M * N;
  const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128, tid = threadIdx.x, lane = tid & 31;
  const int wm = (tid >> 7) * 64, wn = (tid >> 5 & 3) * 32;
  const bool va = K % 8 == 0 && (uintptr_t)A % 16 == 0;  // A rows are K long; B's: K (TN) or N (NN)
#ifdef HGEMM_LAYOUT_TN
  const bool vb = K % 8 == 0 && (uintptr_t)B % 16 == 0;
#else
  const bool vb = N % 8 == 0 && (uintptr_t)B % 16 == 0;
#endif
  const int tiles = (K + BK - 1) / BK;
  float acc[4][4][4] = {};
  for (int t = 0; t < 2; ++t) {
    if (t < tiles) load_stage(smem + t * STAGE, A, B, M, N, K, m0, n0, t * BK, va, vb, tid);
    asm volatile("cp.async.commit_group;\n");
  }
  for (int t = 0; t < tiles; ++t) {
    // tile t is in once one younger group at most is pending; the barrier makes that so for every
    // thread, and frees the stage of tile t - 1 for tile t + 2
    asm volatile("cp.async.wait_group 1;\n");
    __syncthreads();
    if (t + 2 < tiles) load_stage(smem + (t + 2) % 3 * STAGE, A, B, M, N, K, m0, n0, (t + 2) * BK, va, vb, tid);
    asm volatile("cp.async.commit_group;\n");
    const __half* sa = smem + t % 3 * STAGE;
    const __half* sb = sa + 128 * AP;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[4][4], b[4][2], r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) LDSM(a[i], sa + (wm + i * 16 + (lane & 15)) * AP + kk + (lane >> 4) * 8, "");
#pragma unroll
      for (int j = 0; j < 4; j += 2) {  // 8x8 blocks (n, k): (0, 0) (0, 8) (8, 0) (8, 8)
        const int q = lane >> 3, n = wn + j * 8 + (q >> 1) * 8, k = kk + (q & 1) * 8;
#ifdef HGEMM_LAYOUT_TN
        LDSM(r, sb + (n + (lane & 7)) * BP + k, "");
#else
        LDSM(r, sb + (k + (lane & 7)) * BP + n, ".trans");
#endif
        b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                       "{%8,%9}, {%0,%1,%2,%3};\n"
                       : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                       : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
  }
  const bool pair = N % 2 == 0 && (uintptr_t)C % 4 == 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the fragment
        const int row = m0 + wm + i * 16 + (lane >> 2) + 8 * h, col = n0 + wn + j * 8 + (lane & 3) * 2;
        __half* c = C + (long long)row * N + col;
        const float x = acc[i][j][2 * h], y = acc[i][j][2 * h + 1];
        if (row >= M) continue;
        if (pair && col + 1 < N) {
          *reinterpret_cast<__half2*>(c) = __floats2half2_rn(x, y);
          continue;
        }
        if (col < N) c[0] = __float2half_rn(x);
        if (col + 1 < N) c[1] = __float2half_rn(y);
      }
}

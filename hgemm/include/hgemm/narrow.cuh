// hgemm/narrow.cuh: narrow-N HGEMM (a few columns of C, N <= 16 where it pays), any M, K, batch, row
// pitch and alignment, both layouts. With so few columns the GEMM is A (M x K) read once against a B
// small enough to sit in shared memory: 2*M*K bytes of A, 2*M*K*N fp32 CUDA-core flops, no tensor cores.
//
//   Narrow<NB, LPR, R, KW, SWAP, U>: a CTA's NB columns of C (grid.y: column blocks, one for N <= NB;
//     past the block's end zeros), B staged as fp32 [KC][NB] in shared memory KC k at a time. Lanes
//     walk A's rows along k: LPR lanes share a row, each lane R rows, so a warp's load of a row is one
//     contiguous run of 2-byte elements. Any pitch and any base alignment therefore read at full
//     width with no second code path, where the tile families fall back to element-wise or
//     register-realigned loads. KW warps split each row's k (few rows, long K) and their sums meet in
//     shared memory; a lane's NB sums per row meet across its LPR lanes by shuffles. No workspace, no
//     split over CTAs. A lane issues U loads (its R rows' share) before it uses any, and a thread all
//     its loads of a staged chunk before it stores any: the walk is bound by the bytes in flight, so a
//     CTA should wait out one memory latency a batch, not one an element.
//   SWAP (TN only, where A and B are both row-major over k): the roles swap for a few rows of C
//     (M <= 16): B's N rows are walked, A is staged, and C is written transposed back into place.
// Grid: (cdiv(M, ROWS), cdiv(N, NB), batch), with SWAP (cdiv(N, ROWS), cdiv(M, NB), batch); ROWS =
// (8 / KW) * (32 / LPR) * R walked rows per 256-thread CTA. Correct for any shape; past a few column
// blocks each re-reads the walked operand, and the tile families are faster.
//
//   extern "C" __global__ void __launch_bounds__(256, 2)
//   my_narrow(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//             int M, int N, int K, int batch, void* workspace) {
//     hgemm::Narrow<4, 32, 2, 1, false, 16>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (cdiv(M, Narrow<4, 32, 2, 1, false, 16>::ROWS), cdiv(N, 4), batch), smem Narrow<...>::SMEM_BYTES
#pragma once

#include <hgemm/common.cuh>

namespace hgemm {

template <int NB, int LPR, int R, int KW, bool SWAP, int U>
struct Narrow {
  static constexpr int NT = 256;
  static constexpr int WARPS = NT / 32;
  static constexpr int GROUPS = 32 / LPR;              // row groups of LPR lanes in a warp
  static constexpr int ROWS = WARPS / KW * GROUPS * R;  // rows of C per CTA
  static constexpr int KC = 8192 / NB;                 // k per staged chunk of B: 32 KB of fp32
  static constexpr int STEP = KW * LPR;                // k distance between a lane's consecutive elements
  // loads a lane issues before using them: U, or as many steps as a chunk holds (KW = 8, NB >= 8)
  static constexpr int UNROLL = KC / STEP < U ? (KC / STEP > 1 ? KC / STEP : 1) : U;
  static constexpr int PER = KC / NT;                  // k a thread stages per chunk (KC * NB / NT = 32 values)
  static constexpr int RED = KW > 1 ? KW * ROWS * NB : 0;  // fp32 partial sums of the KW warps
  static constexpr int SMEM_BYTES = (KC * NB + RED) * 4;
  static_assert(NB == 1 || NB == 2 || NB == 4 || NB == 8 || NB == 16, "NB: a power of two up to 16");
  static_assert(LPR >= 1 && LPR <= 32 && 32 % LPR == 0, "LPR lanes a row must divide the warp");
  static_assert(KC % NT == 0, "a chunk stages a whole number of k a thread");
  static_assert(KW >= 1 && WARPS % KW == 0, "KW warps a row must divide the CTA's warps");
  static_assert(!SWAP || kLayout == Layout::TN, "SWAP needs both operands row-major over k (TN)");

  // NB fp32 values of B's row k in shared memory, vector loads where NB allows.
  __device__ __forceinline__ static void load_b(const float* p, float (&b)[NB]) {
    if constexpr (NB % 4 == 0) {
#pragma unroll
      for (int j = 0; j < NB / 4; ++j) {
        const float4 v = reinterpret_cast<const float4*>(p)[j];
        b[4 * j] = v.x; b[4 * j + 1] = v.y; b[4 * j + 2] = v.z; b[4 * j + 3] = v.w;
      }
    } else if constexpr (NB == 2) {
      const float2 v = *reinterpret_cast<const float2*>(p);
      b[0] = v.x; b[1] = v.y;
    } else {
      b[0] = p[0];
    }
  }

  // acc[r][n] += A[row r][k] * B[k][n] for one k: a[r] the rows' fp16 elements, bk B's row k staged.
  __device__ __forceinline__ static void fma_step(const float* bk, const unsigned short (&a)[R], float (&acc)[R][NB]) {
    float bv[NB];
    load_b(bk, bv);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float av = __half2float(__ushort_as_half(a[r]));
#pragma unroll
      for (int n = 0; n < NB; ++n) acc[r][n] = fmaf(av, bv[n], acc[r][n]);
    }
  }

  // UNROLL steps of a lane from k (its rows' element k, k + STEP, ...; `left` k remain in the chunk),
  // all loads before the first use; GUARD: steps at or past `left` neither load nor add.
  template <bool GUARD>
  __device__ __forceinline__ static void steps(const unsigned short* const (&arow)[R], int k, int left,
                                               const float* bk, float (&acc)[R][NB]) {
    unsigned short a[UNROLL][R];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) a[u][r] = !GUARD || u * STEP < left ? __ldg(arow[r] + k + u * STEP) : 0;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (!GUARD || u * STEP < left) fma_step(bk + u * STEP * NB, a[u], acc);
  }

  // workspace: unused (the launch spec asks for none); the families' common entry signature
  __device__ static void run(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                             int M, int N, int K, int batch, void* /*workspace*/) {
    extern __shared__ __align__(16) float smem[];  // [KC][NB] B chunk (fp32), then [KW][ROWS][NB] sums
    float* sB = smem;
    float* sRed = smem + KC * NB;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kw = warp % KW, rw = warp / KW;   // this warp's share of k and its row slot
    const int group = lane / LPR, lg = lane % LPR;
    const long long b = blockIdx.z;
    const unsigned short* Ab = reinterpret_cast<const unsigned short*>(A) + b * (long long)M * K;
    const unsigned short* Bb = reinterpret_cast<const unsigned short*>(B) + b * (long long)K * N;
    // the walked operand (rows x K) and the staged one (cols x K, or K x cols for NN's B)
    const int rows = SWAP ? N : M, cols = SWAP ? M : N;
    const unsigned short* walked = SWAP ? Bb : Ab;
    const unsigned short* staged = SWAP ? Ab : Bb;
    constexpr bool k_major = kLayout == Layout::NN;   // NN's B is K x N; the rest are row-major over k
    const int n0 = blockIdx.y * NB, nn = min(NB, cols - n0);   // this CTA's columns of the product
    const int local0 = (rw * GROUPS + group) * R;   // this lane's first row within the CTA's ROWS
    const int row0 = blockIdx.x * ROWS + local0;

    // Rows past the last read the last one (valid memory) and are never stored.
    const unsigned short* arow[R];
#pragma unroll
    for (int r = 0; r < R; ++r) arow[r] = walked + (long long)min(row0 + r, rows - 1) * K;

    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < NB; ++n) acc[r][n] = 0.f;

    for (int kc = 0; kc < K; kc += KC) {
      const int kn = min(KC, K - kc);
      // The chunk of the staged operand: a thread a k (NN reads B[k][n0..n0+nn-1], a short run; TN
      // B[n0 + n][k], or with SWAP A's row n0 + n: consecutive threads, consecutive elements), every
      // load of the thread's share issued before the first store, which would otherwise wait out a
      // memory latency per element; and before the barrier, so that they overlap the other warps'
      // last steps on the previous chunk. Columns nn..NB-1 are stored as zeros.
      float v[PER][NB];
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int k = threadIdx.x + j * NT;
#pragma unroll
        for (int n = 0; n < NB; ++n) {
          const long long src = k_major ? (long long)(kc + k) * cols + n0 + n : (long long)(n0 + n) * K + kc + k;
          v[j][n] = k < kn && n < nn ? __half2float(__ushort_as_half(__ldg(staged + src))) : 0.f;
        }
      }
      __syncthreads();   // the previous chunk's readers are done
#pragma unroll
      for (int j = 0; j < PER; ++j) {
        const int k = threadIdx.x + j * NT;
        if (k < kn) {
#pragma unroll
          for (int n = 0; n < NB; ++n) sB[k * NB + n] = v[j][n];
        }
      }
      __syncthreads();

      // UNROLL steps a batch, every load out before the first is used; the chunk's last batch, with
      // fewer steps left, guards each step instead of taking them one memory latency at a time.
#pragma unroll 1
      for (int k0 = kw * LPR + lg; k0 < kn; k0 += STEP * UNROLL) {
        if (k0 + (UNROLL - 1) * STEP < kn) {
          steps<false>(arow, kc + k0, kn - k0, sB + k0 * NB, acc);
        } else {
          steps<true>(arow, kc + k0, kn - k0, sB + k0 * NB, acc);
        }
      }
    }

    // The LPR lanes of a row group: butterfly sums, every lane of the group then holds them all.
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < NB; ++n)
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], o);

    __half* Cb = C + b * (long long)M * N;
    // product (row, column) in C: C[row][column], or with SWAP C[column][row]
    auto at = [&](int row, int col) { return SWAP ? (long long)col * rows + row : (long long)row * cols + col; };
    if constexpr (KW == 1) {
      // the group's lanes share the stores: value (r, n) goes out from lane (r * NB + n) % LPR
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if ((r * NB + n) % LPR == lg && n < nn && row0 + r < rows)
            Cb[at(row0 + r, n0 + n)] = __float2half_rn(acc[r][n]);
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < NB; ++n)
          if ((r * NB + n) % LPR == lg) sRed[(kw * ROWS + local0 + r) * NB + n] = acc[r][n];
      __syncthreads();
      for (int i = threadIdx.x; i < ROWS * NB; i += NT) {
        const int lr = i / NB, n = i % NB, row = blockIdx.x * ROWS + lr;
        if (n >= nn || row >= rows) continue;
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < KW; ++w) s += sRed[(w * ROWS + lr) * NB + n];
        Cb[at(row, n0 + n)] = __float2half_rn(s);
      }
    }
  }
};

}  // namespace hgemm

// hgemm/skinny_mma.cuh: HGEMM with M <= 16, or N <= 16, on tensor cores: the wide operand streamed
// from DRAM straight into the mma.sync fragments (no shared-memory staging), every byte of it read once.
//
// The kernel computes D (R x W) = X (R x K) . Y^T (Y is W x K), 16 * RG rows a chunk:
//   M <= 16 (SWAP false): X = A, Y = B (TN: B's rows; NN: B's columns), D = C;
//   N <= 16 (SWAP true):  X = B's columns (TN: B's rows), Y = A's rows, D = C^T (C is written by rows).
// A GEMM this skinny is bound by reading Y (2*K*W bytes). The m16n8k16 atom takes 16 rows of X, so the
// whole of R is one atom (rows past R are zeros), and 16 rows of fp32 FMAs on CUDA cores would cost as
// much as the stream. What lets 16-byte loads feed the atom without staging: a dot product may visit k
// in any order. A lane loads 16 consecutive k of X's rows and of Y (two 16-byte vectors each), and the
// 64 k of a chunk go to the fragment slots as
//   k = 16*q + 4*s + 2*p + e      (q = lane % 4, s the k16 step, p the fragment register, e the half),
// the same order for X and Y, so each mma sums products of matching k.
//   Y's rows along k (TN, and every SWAP): lane g = lane / 4 reads row n of Y; the vectors are the
//     fragments as loaded.
//   NN without SWAP (Y = B's columns, B K x N): vectors run along n. A lane reads, from B's row at the k
//     of its slots, 8 consecutive columns, and movmatrix.trans turns each register into the fragment of
//     an n8 tile whose columns sit 8 apart; C's columns are put back in order at the end, where each lane
//     holds 8 consecutive columns of two rows.
//   NN with SWAP (X = B's columns): X is N <= 16 columns of B, read by every column block from L2; a
//     lane gathers its 8 k of a column with 2-byte loads.
//
// SkinnyMma<WARPS, T, U, SPLIT, SWAP, LOADS, RG>: a CTA owns BN = 8*T columns of D and ROWS = 16*RG rows
// (grid.z walks the batch and R in chunks of ROWS); with RG > 1 each fragment of Y loaded feeds RG atoms,
// so Y is streamed once per ROWS rows rather than once per 16. Its WARPS warps and the SPLIT CTAs of
// its cluster (grid.x = SPLIT x the column blocks, __cluster_dims__(SPLIT, 1, 1)) take K's 64-k chunks
// in turn, a warp issuing the loads of U chunks before their mmas. The warps' sums meet in shared
// memory, the cluster's through distributed shared memory: no workspace, no second pass. Fast path:
// the vector-loaded rows 16-byte aligned (K % 8 == 0; for NN without SWAP N % 8 == 0 too) and 16-byte
// aligned bases. Otherwise, with
// LOADS = pair, the same chunks and vectors, each vector from the two aligned 16-byte blocks it
// straddles, realigned in registers (load_chunk_pair: elements past the row's end zero); with elem, the
// same fragments from guarded 2-byte loads, an mma step at a time: any shape, at a fraction of the speed.
//
//   extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 2)
//   my_gemv(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//           int M, int N, int K, int batch, void* workspace) {
//     hgemm::SkinnyMma<8, 4, 1, 2>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (2 * cdiv(N, 32), 1, batch * cdiv(M, 16))
//   (SWAP: SkinnyMma<8, 4, 1, 2, true>, grid (2 * cdiv(M, 32), 1, batch * cdiv(N, 16)))
#pragma once

#include <hgemm/cluster.cuh>
#include <hgemm/cluster_splitk.cuh>
#include <hgemm/common.cuh>
#include <hgemm/skinny.cuh>

namespace hgemm {

// The transpose of the 8x8 b16 matrix a warp holds one register a lane (row lane / 4, columns
// 2 * (lane % 4) and + 1), in the same layout.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

template <int WARPS, int T, int U, int SPLIT, bool SWAP = false, MisalignedLoads LOADS = MisalignedLoads::elem,
          int RG = 1>
struct SkinnyMma {
  static constexpr int NT = WARPS * 32;
  static constexpr int ROWS = 16 * RG;   // rows of D a CTA: RG atoms' rows, sharing each fragment of Y
  static constexpr int BN = 8 * T;   // columns of D a CTA (T n8 tiles)
  static constexpr int KC = 64;      // k a chunk: 4 mma steps
  static constexpr bool kTN = kLayout == Layout::TN;
  static constexpr bool kYRows = SWAP || kTN;    // Y's rows run along k in memory
  static constexpr bool kXRows = !SWAP || kTN;   // X's rows run along k (else B's columns, gathered)
  // Rows of the partial sums in shared memory, in floats: a multiple of 4 (16-byte rows for the v4 reads
  // of the cluster's reduction). A half-warp's float2 stores of a row group (g = 0..3, 2q) then fall in
  // distinct banks at BN + 8 where columns are in order; NN's columns step 8 apart with q
  // (spread_column), and BN + 4 leaves them two to a bank, the fewest a multiple of 4 allows.
  static constexpr int PITCH = BN + (kYRows ? 8 : 4);
  static_assert(kYRows || T % 4 == 0, "NN: a lane's 16-byte vector is 8 columns of 4 tiles");
  static_assert(SPLIT == 1 || SPLIT == 2 || SPLIT == 4 || SPLIT == 8, "clusters of 1, 2, 4 or 8 CTAs");
  static_assert(RG == 1 || RG == 2 || RG == 4, "16, 32 or 64 rows a CTA");
  static_assert(WARPS * ROWS * PITCH * 4 <= 48 * 1024, "the warps' partial sums in static shared memory");

  // The column of D (from the CTA's first) that column c of n8 tile t stands for.
  __device__ __forceinline__ static int column(int t, int c) {
    if constexpr (kYRows) return 8 * t + c;
    else return spread_column(t, c);
  }
  // Where element (row m, k) of X and (row n, k) of Y lie: along a row, or down B's column (pitch N).
  __device__ __forceinline__ static long long x_at(int m, int k, int N, int K) {
    return kXRows ? (long long)m * K + k : (long long)k * N + m;
  }
  __device__ __forceinline__ static long long y_at(int n, int k, int N, int K) {
    return kYRows ? (long long)n * K + k : (long long)k * N + n;
  }

  // One chunk's fragments: each atom's two row groups of X (16 * i + g, + 8) and T tiles of Y, 8
  // registers each, register w = 2 * s + p. k0 >= K loads zeros.
  struct Frags {
    uint32_t a[RG][2][8];
    uint32_t b[T][8];
  };

  // 8 consecutive elements of a 16-byte aligned row segment, or zeros where none is in range.
  template <bool STREAM>
  __device__ __forceinline__ static uint4 vec8(const __half* src, bool in_range) {
    if (!in_range) return make_uint4(0u, 0u, 0u, 0u);
    if constexpr (STREAM) return ld_stream(src);
    else return __ldg(reinterpret_cast<const uint4*>(src));
  }
  // 8 consecutive k of X's row m where X is B's column (pitch N), gathered, `keep` of them in range
  // (on the fast path K % 8 == 0: all 8 or none).
  __device__ __forceinline__ static uint4 column8(const __half* X, int m, int k, int N, int keep) {
    const unsigned short* src = reinterpret_cast<const unsigned short*>(X) + x_at(m, k, N, 0);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = 2 * i < keep ? __ldg(src + (long long)(2 * i) * N) : 0u;
      const uint32_t hi = 2 * i + 1 < keep ? __ldg(src + (long long)(2 * i + 1) * N) : 0u;
      w[i] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }

  // 8 consecutive elements of a row segment, `keep` of them in range (<= 0: none; >= 8: all). ALIGNED:
  // the segment is 16-byte aligned and wholly in range or wholly out, one vector load (STREAM: not
  // kept in L1); else the aligned blocks it straddles, realigned (elements past `keep` zero).
  template <bool ALIGNED, bool STREAM>
  __device__ __forceinline__ static uint4 row8(const __half* src, int keep) {
    if constexpr (ALIGNED) return vec8<STREAM>(src, keep > 0);
    else return load_chunk_pair(reinterpret_cast<const unsigned short*>(src), min(keep, 8));
  }

  // A chunk's loads, k0 >= K loading zeros. ALIGNED, the fast path: rows along k 16-byte aligned (with
  // K % 8 == 0, and for NN without SWAP N % 8 == 0, a vector is wholly in range or wholly out); else
  // LOADS == pair's realigned vectors. Rows past an operand's end are addressed at its last row, unread.
  template <bool ALIGNED>
  __device__ __forceinline__ static void load(Frags& f, const __half* X, const __half* Y, int rows, int W, int N,
                                              int K, int n0, int k0, int g, int q) {
#pragma unroll
    for (int i = 0; i < RG; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int m = 16 * i + g + 8 * r;
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const int k = k0 + 16 * q + 8 * v;
          const int keep = m < rows ? K - k : 0;
          uint4 x;
          if constexpr (kXRows) x = row8<ALIGNED, false>(X + x_at(min(m, rows - 1), k, N, K), keep);
          else x = column8(X, m, k, N, keep);
#pragma unroll
          for (int w = 0; w < 4; ++w) f.a[i][r][4 * v + w] = word_of(x, w);
        }
      }
    if constexpr (kYRows) {
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const int n = n0 + 8 * t + g;
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const int k = k0 + 16 * q + 8 * v;
          const uint4 x = row8<ALIGNED, true>(Y + y_at(min(n, W - 1), k, N, K), n < W ? K - k : 0);
#pragma unroll
          for (int w = 0; w < 4; ++w) f.b[t][4 * v + w] = word_of(x, w);
        }
      }
    } else {
#pragma unroll
      for (int w = 0; w < 8; ++w) {   // the 8x8 blocks of register w = 2 * s + p
        const int s = w / 2, p = w % 2;
        // lane g reads the row of slot (q, e) = (g / 2, g % 2); after the transpose lane (g, q) holds
        // the rows of its own slots, for column g of each block
        const int kr = k0 + 16 * (g / 2) + 4 * s + 2 * p + (g % 2);
#pragma unroll
        for (int h = 0; h < T / 4; ++h) {
          const int n = n0 + 32 * h + 8 * q;
          const uint4 x = row8<ALIGNED, true>(Y + y_at(n, min(kr, K - 1), N, K), kr < K ? W - n : 0);
#pragma unroll
          for (int j = 0; j < 4; ++j) f.b[4 * h + j][w] = movmatrix_trans(word_of(x, j));
        }
      }
    }
  }

  __device__ __forceinline__ static void mma(float (&acc)[RG][T][4], const Frags& f) {
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int i = 0; i < RG; ++i) {
        const uint32_t a[4] = {f.a[i][0][2 * s], f.a[i][1][2 * s], f.a[i][0][2 * s + 1], f.a[i][1][2 * s + 1]};
#pragma unroll
        for (int t = 0; t < T; ++t) mma_m16n8k16(acc[i][t], a, f.b[t][2 * s], f.b[t][2 * s + 1]);
      }
  }

  template <bool ALIGNED>
  __device__ __forceinline__ static void mainloop(float (&acc)[RG][T][4], const __half* X, const __half* Y, int rows,
                                                  int W, int N, int K, int n0, int worker, int g, int q) {
    const int chunks = (K + KC - 1) / KC;
    constexpr int WORKERS = WARPS * SPLIT;
    for (int c = worker; c < chunks; c += WORKERS * U) {
      Frags f[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int cu = c + u * WORKERS;
        load<ALIGNED>(f[u], X, Y, rows, W, N, K, n0, cu < chunks ? cu * KC : K, g, q);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (c + u * WORKERS < chunks) mma(acc, f[u]);
    }
  }

  // Any alignment: the same fragments, slots and columns, each element a guarded 2-byte load, an mma
  // step at a time (a step's 8 + 4T elements in flight, not a chunk's vectors).
  __device__ __forceinline__ static unsigned short elem(const __half* p, long long at, bool in_range) {
    return in_range ? __ldg(reinterpret_cast<const unsigned short*>(p) + at) : (unsigned short)0;
  }
  __device__ __forceinline__ static void mainloop_any(float (&acc)[RG][T][4], const __half* X, const __half* Y,
                                                      int rows, int W, int N, int K, int n0, int worker, int g,
                                                      int q) {
    const int chunks = (K + KC - 1) / KC;
    for (int c = worker; c < chunks; c += WARPS * SPLIT) {
#pragma unroll 1
      for (int s = 0; s < 4; ++s) {
        uint32_t a[RG][4], b[T][2];
#pragma unroll
        for (int i = 0; i < RG; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {   // register j: row 16 * i + g + 8 * (j % 2), slot register p = j / 2
            const int m = 16 * i + g + 8 * (j % 2), k = c * KC + 16 * q + 4 * s + 2 * (j / 2);
            a[i][j] = elem(X, x_at(m, k, N, K), m < rows && k < K) |
                      uint32_t(elem(X, x_at(m, k + 1, N, K), m < rows && k + 1 < K)) << 16;
          }
#pragma unroll
        for (int t = 0; t < T; ++t) {
          const int n = n0 + column(t, g);
#pragma unroll
          for (int p = 0; p < 2; ++p) {
            const int k = c * KC + 16 * q + 4 * s + 2 * p;
            b[t][p] = elem(Y, y_at(n, k, N, K), n < W && k < K) |
                      uint32_t(elem(Y, y_at(n, k + 1, N, K), n < W && k + 1 < K)) << 16;
          }
        }
#pragma unroll
        for (int i = 0; i < RG; ++i)
#pragma unroll
          for (int t = 0; t < T; ++t) mma_m16n8k16(acc[i][t], a[i], b[t][0], b[t][1]);
      }
    }
  }

  // Element (m, w) of D summed over the cluster's CTAs: this CTA's partial sums, or every peer's
  // through distributed shared memory.
  __device__ __forceinline__ static float cluster_sum(const float* local) {
    if constexpr (SPLIT == 1) {
      return *local;
    } else {
      float s = 0.f;
#pragma unroll
      for (int r = 0; r < SPLIT; ++r) {
        float x;
        asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(x) : "r"(sm90::map_to_rank(smem_u32(local), r))
                     : "memory");
        s += x;
      }
      return s;
    }
  }

  __device__ __forceinline__ static void run(const __half* __restrict__ A, const __half* __restrict__ B,
                                             __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
    // Each warp's ROWS x BN sums, columns in order, rows PITCH floats apart; warp 0's become the CTA's.
    __shared__ __align__(16) float part[WARPS][ROWS * PITCH];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3;
    const int rank = SPLIT > 1 ? static_cast<int>(sm90::cluster_rank()) : 0;
    const int R = SWAP ? N : M, W = SWAP ? M : N;   // D's rows and columns
    const int n0 = (blockIdx.x / SPLIT) * BN;
    const int mchunks = (R + ROWS - 1) / ROWS;
    const long long b = blockIdx.z / mchunks;
    const int m0 = (blockIdx.z % mchunks) * ROWS;
    const int rows = min(ROWS, R - m0);
    const __half* Ab = A + b * M * K;
    const __half* Bb = B + b * K * N;
    __half* Cb = C + b * M * N;
    // X from its chunk's first row: A's rows; B's rows (TN) or columns (NN) with SWAP
    const __half* X = SWAP ? Bb + (kTN ? (long long)m0 * K : m0) : Ab + (long long)m0 * K;
    const __half* Y = SWAP ? Ab : Bb;

    float acc[RG][T][4];
#pragma unroll
    for (int i = 0; i < RG; ++i)
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][t][j] = 0.f;
    // The vector-loaded operands: A's rows, and B unless SWAP gathers its columns (NN).
    const uintptr_t vectors = reinterpret_cast<uintptr_t>(A) | (kXRows || !SWAP ? reinterpret_cast<uintptr_t>(B) : 0);
    const bool vec = K % 8 == 0 && (kYRows || N % 8 == 0) && vectors % 16 == 0;
    if (vec) mainloop<true>(acc, X, Y, rows, W, N, K, n0, rank * WARPS + warp, g, q);
    else if constexpr (LOADS == MisalignedLoads::pair) mainloop<false>(acc, X, Y, rows, W, N, K, n0, rank * WARPS + warp, g, q);
    else mainloop_any(acc, X, Y, rows, W, N, K, n0, rank * WARPS + warp, g, q);

    // accumulators 2h, 2h + 1 of atom i's tile t: row 16i + g + 8h, adjacent columns column(t, 2q) and + 1
#pragma unroll
    for (int i = 0; i < RG; ++i)
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (16 * i + g + 8 * h < rows)
            *reinterpret_cast<float2*>(&part[warp][(16 * i + g + 8 * h) * PITCH + column(t, 2 * q)]) =
                make_float2(acc[i][t][2 * h], acc[i][t][2 * h + 1]);
    __syncthreads();
    // plain loads and stores, no atomics: a shared-memory fp32 atomicAdd is a compare-and-swap loop on sm_90
    for (int j = threadIdx.x; j < rows * BN; j += NT) {
      const int i = (j / BN) * PITCH + j % BN;   // the rows' padding is never written, so never read
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) sum += part[w][i];
      part[0][i] = sum;
    }
    __syncthreads();
    if constexpr (SPLIT > 1) sm90::cluster_sync();   // the peers' sums are complete and visible

    // Each CTA of the cluster adds up and stores its share of D.
    if constexpr (SWAP) {
      // D's column n0 + w is C's row; its `rows` values are that row's columns m0.. . Consecutive threads
      // take consecutive elements of C (one contiguous run where the chunk holds all of N).
      const int wn = min(BN, W - n0);
      for (int e = rank * NT + threadIdx.x; e < wn * rows; e += NT * SPLIT) {
        const int w = e / rows, m = e % rows;
        Cb[(long long)(n0 + w) * N + m0 + m] = __float2half_rn(cluster_sum(&part[0][m * PITCH + w]));
      }
    } else {
      // 8-column vectors of C's rows
      const bool cvec = N % 8 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
      for (int v = rank * NT + threadIdx.x; v < rows * (BN / 8); v += NT * SPLIT) {
        const int m = v / (BN / 8), c = (v % (BN / 8)) * 8;
        float s[8];
        if constexpr (SPLIT == 1) {
#pragma unroll
          for (int e = 0; e < 8; ++e) s[e] = part[0][m * PITCH + c + e];
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) s[e] = 0.f;
          const uint32_t local = smem_u32(&part[0][m * PITCH + c]);
#pragma unroll
          for (int r = 0; r < SPLIT; ++r) {
            const uint32_t at = sm90::map_to_rank(local, r);
            float4 x, y;
            asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                         : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w) : "r"(at) : "memory");
            asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                         : "=f"(y.x), "=f"(y.y), "=f"(y.z), "=f"(y.w) : "r"(at + 16) : "memory");
            s[0] += x.x; s[1] += x.y; s[2] += x.z; s[3] += x.w;
            s[4] += y.x; s[5] += y.y; s[6] += y.z; s[7] += y.w;
          }
        }
        const int col = n0 + c;
        __half* dst = Cb + (long long)m0 * N + (long long)m * N + col;
        if (cvec && col + 8 <= N) {
          const uint4 o = make_uint4(pack_halves(s[0], s[1]), pack_halves(s[2], s[3]), pack_halves(s[4], s[5]),
                                     pack_halves(s[6], s[7]));
          *reinterpret_cast<uint4*>(dst) = o;
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (col + e < N) dst[e] = __float2half_rn(s[e]);
        }
      }
    }
    if constexpr (SPLIT > 1) sm90::cluster_sync();   // no CTA leaves while a peer reads its sums
    (void)batch;
    (void)workspace;
  }
};

}  // namespace hgemm

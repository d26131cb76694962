// hgemm/small_k_mma.cuh: HGEMM with 16 < K <= 64 on tensor cores, C streamed in aligned 16-byte stores,
// any M, N, K, batch, row pitch and alignment, both layouts.
//
// With K this short the product is still bound by writing C (2*M*N bytes out against 2*(M + N)*K in),
// but 2*K flops an output element are too many for CUDA cores (small_k.cuh stops at K = 16), and the
// tile families store an odd-N C element by element. Here B's values for a warp's 64 columns sit in
// registers as mma.sync fragments, loaded once (through shared memory, which holds the CTA's 72
// columns: each warp reads its own 64 at its phase), and each warp walks groups of 16 rows of A
// through m16n8k16 atoms, storing every row's 8 consecutive columns a lane as one aligned vector.
//
//   SmallKMma<KMAX, U>: warp w of a CTA takes the rows r = w (mod 8) of its batch entry, as SmallK
//     does: their starts share one offset mod 8 in C's allocation (the phase), so the warp fixes its
//     columns once (cs = 64x - phase: the 16-byte aligned column at or before the row's start, each
//     chunk cs + 8j aligned; a warp whose columns start past N has no work). An mma row group is 16
//     such rows, 8 * gridDim.y apart. B's columns are loaded in the order that leaves each lane holding 8
//     consecutive columns of C (hgemm::spread_column, as skinny_mma.cuh's NN path), and A's k in the order that
//     lets a lane's 16-byte vectors of a row be its fragments as loaded: k = (KMAX/4)*q + 4*s + 2*p + e
//     for lane % 4 = q, step s, register p, half e, B's registers in the same order. U row groups a
//     step, their loads of A issued together. Chunks that straddle a row's ends go out element by
//     element. Past KMAX (the family applies to K <= KMAX), a slow path: CUDA-core dot products.
// Grid: (cdiv(N + 8, 64), Y, batch) for any Y >= 1: Y CTAs share a batch entry's rows.
//
//   extern "C" __global__ void __launch_bounds__(256, 1)
//   my_short_k(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//              int M, int N, int K, int batch, void* workspace) {
//     hgemm::SmallKMma<64, 2>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (cdiv(N + 8, 64), max(1, min(cdiv(M, 128), num_sms // (cdiv(N + 8, 64) * batch))), batch)
#pragma once

#include <hgemm/common.cuh>

namespace hgemm {

template <int KMAX, int U>
struct SmallKMma {
  static constexpr int NT = 256;
  static constexpr int WARPS = NT / 32;
  static constexpr int T = 8;               // n8 tiles: 64 columns a CTA
  static constexpr int BN = 8 * T;
  static constexpr int BW = BN + 8;         // columns of B a CTA stages: every warp's 64 at its phase
  // The staged block's row pitch in halves: a fragment read's four lane columns q take rows KMAX/4
  // apart, which at 72 fall four to a bank (two at 74), and TN's staging stores, a column's k by
  // consecutive threads, four to a bank (none at 74).
  static constexpr int PITCH = BW + 2;
  static constexpr int STEPS = KMAX / 16;   // mma k16 steps
  static constexpr int WORDS = KMAX / 8;    // 32-bit registers of a row's k a lane: KMAX/4 halves
  static_assert(KMAX == 32 || KMAX == 64, "K up to 32 or 64: B's fragments live in registers");
  static_assert(U >= 1 && U <= 4, "U: row groups a step");

  // The column (from the block's first) that column c of n8 tile t stands for: lane (g, q) then holds
  // columns 32 * (t / 4) + 8 * q + 0..7 of its rows, the accumulators of tiles t % 4 = 0..3 in order.
  __device__ __forceinline__ static int column(int t, int c) { return spread_column(t, c); }
  // Element i of the staged block as (k, column from the block's first): consecutive i run along B's
  // rows in memory (n for NN, k for TN), so a warp's loads are coalesced.
  __device__ __forceinline__ static int2 staged_at(int i) {
    return kLayout == Layout::NN ? make_int2(i / BW, i % BW) : make_int2(i % KMAX, i / KMAX);
  }
  // The k that half e of register p at step s of lane column q stands for.
  __device__ __forceinline__ static int slot_k(int q, int s, int p, int e) { return (KMAX / 4) * q + 4 * s + 2 * p + e; }

  __device__ __forceinline__ static unsigned short b_elem(const __half* B, int N, int K, int k, int col) {
    if (k >= K || col < 0 || col >= N) return 0;
    const long long at = kLayout == Layout::NN ? static_cast<long long>(k) * N + col : static_cast<long long>(col) * K + k;
    return __ldg(reinterpret_cast<const unsigned short*>(B) + at);
  }
  __device__ __forceinline__ static unsigned short a_elem(const __half* A, int M, int K, int r, int k) {
    return r < M && k < K ? __ldg(reinterpret_cast<const unsigned short*>(A) + static_cast<long long>(r) * K + k)
                          : (unsigned short)0;
  }

  // A row's WORDS registers for lane column q (KMAX/4 halves from (KMAX/4) * q), zeros past M or K.
  template <bool VEC>
  __device__ __forceinline__ static void load_row(uint32_t (&w)[WORDS], const __half* A, int M, int K, int r, int q) {
#pragma unroll
    for (int v = 0; v < WORDS / 4; ++v) {
      const int k = (KMAX / 4) * q + 8 * v;
      const __half* src = A + static_cast<long long>(min(r, M - 1)) * K + k;
      uint4 x;
      if constexpr (VEC) {   // K % 8 == 0, A 16-byte aligned: a vector is wholly in range or out
        x = r < M && k < K ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0u, 0u, 0u, 0u);
      } else {
        x = load_chunk_pair(reinterpret_cast<const unsigned short*>(src), r < M ? K - k : 0);
      }
      w[4 * v] = x.x; w[4 * v + 1] = x.y; w[4 * v + 2] = x.z; w[4 * v + 3] = x.w;
    }
  }

  // The 16 x 64 block of a row group: rows rg (lane group g) and rg8 (g + 8), stored a chunk at a time.
  __device__ __forceinline__ static void store_rows(__half* Cb, int M, int N, int cs, int rg, int rg8, int q,
                                                    const float (&acc)[T][4]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? rg8 : rg;
      if (r >= M) continue;
#pragma unroll
      for (int h = 0; h < T / 4; ++h) {
        const int col = cs + 32 * h + 8 * q;
        float v[8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[2 * j] = acc[4 * h + j][2 * half];
          v[2 * j + 1] = acc[4 * h + j][2 * half + 1];
        }
        __half* dst = Cb + static_cast<long long>(r) * N + col;
        if (col >= 0 && col + 8 <= N) {   // the warp's phase makes it 16-byte aligned
          *reinterpret_cast<uint4*>(dst) = make_uint4(pack_halves(v[0], v[1]), pack_halves(v[2], v[3]),
                                                      pack_halves(v[4], v[5]), pack_halves(v[6], v[7]));
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (col + e >= 0 && col + e < N) dst[e] = __float2half_rn(v[e]);
        }
      }
    }
  }

  // The U row groups from r0 (rows r0 + step * i, i = 0..15, per group), as a lane holds them.
  template <bool VEC>
  __device__ __forceinline__ static void load_groups(uint32_t (&a)[U][2][WORDS], const __half* Ab, int M, int K,
                                                     int r0, int step, int g, int q) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int base = r0 + 16 * step * u;
      load_row<VEC>(a[u][0], Ab, M, K, base + step * g, q);
      load_row<VEC>(a[u][1], Ab, M, K, base + step * (g + 8), q);
    }
  }

  // The warp's row groups from `first`, whose A the caller has loaded into `a`; each step's mmas and
  // stores, then the next step's loads.
  template <bool VEC>
  __device__ __forceinline__ static void walk(const __half* Ab, __half* Cb, int M, int K, int N, int cs, int first,
                                              int step, int g, int q, const uint32_t (&bf)[T][STEPS][2],
                                              uint32_t (&a)[U][2][WORDS]) {
#pragma unroll 1
    for (int r0 = first; r0 < M; r0 += 16 * step * U) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int base = r0 + 16 * step * u;
        if (base >= M) break;
        float acc[T][4];
#pragma unroll
        for (int t = 0; t < T; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          const uint32_t af[4] = {a[u][0][2 * s], a[u][1][2 * s], a[u][0][2 * s + 1], a[u][1][2 * s + 1]};
#pragma unroll
          for (int t = 0; t < T; ++t) mma_m16n8k16(acc[t], af, bf[t][s][0], bf[t][s][1]);
        }
        store_rows(Cb, M, N, cs, base + step * g, base + step * (g + 8), q, acc);
      }
      if (r0 + 16 * step * U < M) load_groups<VEC>(a, Ab, M, K, r0 + 16 * step * U, step, g, q);
    }
  }

  // workspace: unused (the launch spec asks for none); the families' common entry signature
  __device__ static void run(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                             int M, int N, int K, int batch, void* /*workspace*/) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3;
    const long long b = blockIdx.z;
    const __half* Ab = A + b * M * K;
    const __half* Bb = B + b * K * N;
    __half* Cb = C + b * M * N;
    // The offset mod 8, in elements of the allocation, of the start of every row this warp takes.
    const long long c_elem = static_cast<long long>(reinterpret_cast<uintptr_t>(C) / sizeof(__half));
    const int phase = static_cast<int>((c_elem + (b * M + warp) * N) % 8);
    const int cs = BN * static_cast<int>(blockIdx.x) - phase;   // < 0: the row's head chunk, 8 - phase in range
    const int step = WARPS * gridDim.y;   // rows of a group are `step` apart: a multiple of 8
    const int first = warp + WARPS * static_cast<int>(blockIdx.y);

    if (K > KMAX) {
      // Past what the family serves: correct and slow, each of a lane's 32 values a dot product over K
      // on CUDA cores, k in sequence, in the accumulator layout the stores take.
      if (cs >= N) return;
#pragma unroll 1
      for (int base = first; base < M; base += 16 * step) {
        const int rg = base + step * g, rg8 = base + step * (g + 8);
        float acc[T][4];
#pragma unroll
        for (int t = 0; t < T; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
#pragma unroll 1
        for (int k = 0; k < K; ++k) {
          const float a0 = __half2float(__ushort_as_half(a_elem(Ab, M, K, rg, k)));
          const float a1 = __half2float(__ushort_as_half(a_elem(Ab, M, K, rg8, k)));
#pragma unroll
          for (int t = 0; t < T; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) {   // column 2q + e of tile t
              const float bv = __half2float(__ushort_as_half(b_elem(Bb, N, K, k, cs + column(t, 2 * q + e))));
              acc[t][e] = fmaf(a0, bv, acc[t][e]);
              acc[t][2 + e] = fmaf(a1, bv, acc[t][2 + e]);
            }
        }
        store_rows(Cb, M, N, cs, rg, rg8, q, acc);
      }
      return;
    }

    // The first step's A goes out before B is staged: a CTA whose warps have one step to take (M up to
    // 128 rows a batch entry) then waits out one DRAM round trip before its mmas, not two.
    const bool vec = K % 8 == 0 && reinterpret_cast<uintptr_t>(A) % 16 == 0;
    uint32_t a[U][2][WORDS];
    if (vec) load_groups<true>(a, Ab, M, K, first, step, g, q);
    else load_groups<false>(a, Ab, M, K, first, step, g, q);

    // B's fragments for this lane, once: column column(t, g) from the warp's first, k in slot order. The
    // CTA stages the BW = BN + 8 columns from BN * blockIdx.x - 8 in shared memory, which covers every
    // warp's columns whatever its phase, so that no lane holds a 64-bit address for each of its 4 * KMAX
    // values of B at once; warp columns start `off` into the block. A thread's LOADS elements are issued
    // together (unrolled into registers, then stored): a loop of dependent load-store pairs would wait
    // out DRAM's latency LOADS times, which on a CTA with one row group to walk is most of its life.
    constexpr int LOADS = KMAX * BW / NT;
    static_assert(KMAX * BW % NT == 0, "the staged block splits evenly over the threads");
    __shared__ unsigned short bs[KMAX][PITCH];
    const int block_col = BN * static_cast<int>(blockIdx.x) - 8;
    unsigned short staged[LOADS];
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const int2 at = staged_at(static_cast<int>(threadIdx.x) + NT * j);
      staged[j] = b_elem(Bb, N, K, at.x, block_col + at.y);
    }
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const int2 at = staged_at(static_cast<int>(threadIdx.x) + NT * j);
      bs[at.x][at.y] = staged[j];
    }
    __syncthreads();
    if (cs >= N) return;   // the grid's last column block, for rows whose phase shifts their columns
    const int off = cs - block_col;   // 8 - phase: 1..8
    uint32_t bf[T][STEPS][2];
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int s = 0; s < STEPS; ++s)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          const int col = off + column(t, g);
          bf[t][s][p] = bs[slot_k(q, s, p, 0)][col] | uint32_t(bs[slot_k(q, s, p, 1)][col]) << 16;
        }
    if (vec) walk<true>(Ab, Cb, M, K, N, cs, first, step, g, q, bf, a);
    else walk<false>(Ab, Cb, M, K, N, cs, first, step, g, q, bf, a);
    (void)batch;
  }
};

}  // namespace hgemm

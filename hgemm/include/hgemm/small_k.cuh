// hgemm/small_k.cuh: HGEMM with a short K (K <= 16 where it pays), any M, N, K, batch, row pitch and
// alignment, both layouts. With K this short the product is bound by writing C: 2*M*N bytes out
// against 2*(M + N)*K in, and 2*K flops an output element, which CUDA cores keep up with (fp32 FMAs,
// no tensor cores). The tile families write C through tiles whose rows start wherever N puts them: on
// an odd N every row is misaligned and goes out element by element. Here every store is a whole
// aligned vector.
//
//   SmallK<KMAX, V, U>: warp w of a CTA walks the rows r = w (mod 8) of its batch entry. Row r of C starts
//     at flat element (b*M + r)*N of the allocation, and that offset mod V is the same for every row the
//     warp takes (8 is a multiple of V), so the warp fixes its columns once: c0, the row's first column at
//     a V-aligned address, and lane l of column block x the V columns from cs = c0 - V + V*(32x + l). A
//     lane loads its V x K values of B once, as fp32 registers; then, a row at a time, the row's K values
//     of A (one address for the whole warp: one transaction), V dot products, and one V*2-byte store. The
//     chunks that straddle a row's ends (the c0 columns before the first aligned one, the last N - c0 mod V)
//     go out element by element. U rows a step, their A loads issued before any is used. Correct for
//     any K: past KMAX, each dot product from global memory (slow; the family applies to K <= KMAX).
// Grid: (cdiv(N + V, 32 * V), Y, batch) for any Y >= 1: Y CTAs share a batch entry's rows, 8 * Y rows apart.
//
//   extern "C" __global__ void __launch_bounds__(256, 4)
//   my_small_k(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//              int M, int N, int K, int batch, void* workspace) {
//     hgemm::SmallK<4, 8, 2>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (cdiv(N + 8, 256), max(1, min(cdiv(M, 16), ...)), batch), smem 0
#pragma once

#include <hgemm/common.cuh>

namespace hgemm {

template <int KMAX, int V, int U>
struct SmallK {
  static constexpr int NT = 256;
  static constexpr int WARPS = NT / 32;   // a warp's rows are WARPS * gridDim.y apart
  static_assert(KMAX >= 1 && KMAX <= 16, "K up to 16: B's V x KMAX values live in registers");
  static_assert(V == 4 || V == 8, "V: columns a lane, 8 (16-byte stores) or 4 (8-byte)");
  static_assert(WARPS % V == 0, "the rows a warp takes must start at one offset mod V");
  static_assert(U >= 1 && U <= 4, "U: rows a step");
  // The first step's rows of A loaded beside B's values: U x KMAX more registers held through B's
  // conversion. At most 8: with 16 or 32, the variants whose registers sit at their launch bound spill
  // (k8 v4 u2, k8 v8 u4, k16 v4 u2 with nvcc 13.0); the launch-bound shapes run the smallest variants.
  // Measured against the later load (benchmarks/small_k_loads/): k8 v4 u1 0.95x the time, k4 the same.
  static constexpr bool EARLY_A = U * KMAX <= 8;

  // V fp32 values as V halves in one aligned vector store.
  __device__ __forceinline__ static void store_vec(__half* dst, const float (&acc)[V]) {
    uint32_t w[V / 2];
#pragma unroll
    for (int j = 0; j < V / 2; ++j) {
      const __half2 h = __floats2half2_rn(acc[2 * j], acc[2 * j + 1]);
      w[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
    if constexpr (V == 8) *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    else *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
  }

  // workspace: unused (the launch spec asks for none); the families' common entry signature
  __device__ static void run(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                             int M, int N, int K, int batch, void* /*workspace*/) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long b = blockIdx.z;
    const unsigned short* Ab = reinterpret_cast<const unsigned short*>(A) + b * M * K;
    const unsigned short* Bb = reinterpret_cast<const unsigned short*>(B) + b * K * N;
    __half* Cb = C + b * M * N;
    // The offset mod V, in elements of the allocation, of the start of every row this warp takes:
    // C's own address counts, so the vector stores are aligned wherever C starts.
    const long long c_elem = static_cast<long long>(reinterpret_cast<uintptr_t>(C) / sizeof(__half));
    const int phase = static_cast<int>((c_elem + (b * M + warp) * N) % V);
    const int c0 = (V - phase) % V;
    const int cs = c0 - V + V * (static_cast<int>(blockIdx.x) * 32 + lane);   // may be < 0: the row's head
    const bool whole = cs >= 0 && cs + V <= N;

    const int step = WARPS * gridDim.y;   // a multiple of 8: every row keeps this warp's offset mod V
    const int first = warp + WARPS * static_cast<int>(blockIdx.y);
    auto b_raw = [&](int k, int col) {      // B[k][col] in either layout, as its fp16 bits
      const long long src = kLayout == Layout::NN ? static_cast<long long>(k) * N + col
                                                  : static_cast<long long>(col) * K + k;
      return __ldg(Bb + src);
    };
    auto to_float = [](unsigned short h) { return __half2float(__ushort_as_half(h)); };
    auto b_at = [&](int k, int col) { return to_float(b_raw(k, col)); };
    auto store = [&](int r, const float (&acc)[V]) {
      const long long row = static_cast<long long>(r) * N;
      if (whole) {
        store_vec(Cb + row + cs, acc);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (cs + j >= 0 && cs + j < N) Cb[row + cs + j] = __float2half_rn(acc[j]);
      }
    };

    if (K > KMAX) {
      // Past what the family serves (applicable() keeps it to K <= KMAX): correct and slow, each
      // dot product over K from global memory, in few registers.
#pragma unroll 1
      for (int r = first; r < M; r += step) {
        float acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int col = min(max(cs + j, 0), N - 1);   // columns outside 0..N-1 are never stored
          float s = 0.f;
#pragma unroll 1
          for (int k = 0; k < K; ++k)
            s = fmaf(to_float(__ldg(Ab + static_cast<long long>(r) * K + k)), b_at(k, col), s);
          acc[j] = s;
        }
        store(r, acc);
      }
      return;
    }

    // B's values for this lane's columns (columns outside 0..N-1 and k >= K hold 0): every load issued
    // before any is converted, so the lane waits on memory once for all of them. Converting each value
    // as it is loaded made ptxas wait on each load in turn before issuing the next (a chain of round
    // trips where a launch is little else, as on 128 x 128 x 1). A step's rows of A the same way, the
    // first step's beside B's where EARLY_A: one wait on memory before the first store, not two.
    unsigned short araw[U][KMAX];
    auto load_a = [&](int r0) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = r0 + u * step;
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
          araw[u][k] = k < K && r < M ? __ldg(Ab + static_cast<long long>(r) * K + k) : static_cast<unsigned short>(0);
      }
    };
    unsigned short braw[KMAX][V];
#pragma unroll
    for (int k = 0; k < KMAX; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int col = cs + j;
        braw[k][j] = k < K && col >= 0 && col < N ? b_raw(k, col) : static_cast<unsigned short>(0);
      }
    if constexpr (EARLY_A) load_a(first);
    float bv[KMAX][V];
#pragma unroll
    for (int k = 0; k < KMAX; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) bv[k][j] = to_float(braw[k][j]);

#pragma unroll 1
    for (int r0 = first; r0 < M; r0 += step * U) {
      if (!EARLY_A || r0 != first) load_a(r0);
      float a[U][KMAX];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < KMAX; ++k) a[u][k] = to_float(araw[u][k]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = r0 + u * step;
        if (r >= M) break;
        float acc[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float s = 0.f;
#pragma unroll
          for (int k = 0; k < KMAX; ++k) s = fmaf(a[u][k], bv[k][j], s);
          acc[j] = s;
        }
        store(r, acc);
      }
    }
  }
};

}  // namespace hgemm

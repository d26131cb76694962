// hgemm/mma_sync_gemm.cuh: the tensor-core mma.sync HGEMM (sm_80+), a template over its tile options.
//
// One CTA computes a BM x BN tile of C for one batch entry and one K range. Operands stream through a
// STAGES-deep cp.async ring of swizzled shared-memory tiles; warps read m16n8k16 fragments with
// ldmatrix (.trans for a k-major B in NN) and accumulate in fp32 registers. Any M, N, K works without
// padding copies:
//   * rows/cols/k outside the problem are zero-filled (cp.async src-size 0), so edge tiles are exact;
//   * when a row pitch is not a multiple of 8 halves (K % 8 for A and TN-B, N % 8 for NN-B) or a base
//     pointer is not 16-byte aligned, 16-byte cp.async would be misaligned: the kernel picks at run
//     time, per operand, a main loop instantiation that loads that operand into registers (8 guarded
//     element loads, or two aligned 16-byte loads realigned: MisalignedLoads) and stores 16-byte
//     chunks into the same swizzled layout, so the aligned path pays nothing for it;
//   * C is written with half2 stores, on rows that start 2 bytes off (odd N) shifted by one column with
//     a shuffle in each quad of lanes (store_row_pairs); the split-K reduction stores element-wise.
// Split-K: the launch's gridDim.y splits the k tiles; with gridDim.y > 1 each CTA adds its fp32
// partial tile into the zero-filled workspace (batch * M * N floats, then one int counter per tile)
// and the CTA that arrives last converts the tile to fp16 and leaves its part of the workspace zero.
//
// Pieces, each usable alone: MmaSyncTile (the tile's derived sizes), TileLoader (global -> swizzled
// smem), MmaSyncGemm<Tile>::{FragOffsets, compute_stage, mainloop, store_tile, splitk_epilogue, run}.
//
//   extern "C" __global__ void __launch_bounds__(256, 2)
//   my_gemm(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//           int M, int N, int K, int batch, void* workspace) {
//     hgemm::MmaSyncGemm<hgemm::MmaSyncTile<128, 128, 32, 2, 4, 3>>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (cdiv(M, 128) * cdiv(N, 128), splits, batch), smem MmaSyncTile<...>::SMEM_BYTES
#pragma once

#include <hgemm/common.cuh>

namespace hgemm {

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int GROUP_M_ = 8,
          MisalignedLoads LOADS_ = MisalignedLoads::pair, Layout LAYOUT_ = kLayout>
struct MmaSyncTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_, GROUP_M = GROUP_M_;
  static constexpr MisalignedLoads LOADS = LOADS_;
  static constexpr bool TN = LAYOUT_ == Layout::TN;

  static constexpr int NT = WARPS_M * WARPS_N * 32;
  static constexpr int WTM = BM / WARPS_M;   // warp tile rows
  static constexpr int WTN = BN / WARPS_N;   // warp tile cols
  static constexpr int MI = WTM / 16;        // m16 fragments per warp
  static constexpr int NI = WTN / 8;         // n8 fragments per warp (even: ldmatrix.x4 loads two)
  static constexpr int A_CPR = BK / 8;       // 16-byte chunks per A smem row (rows = m, cols = k)
  // B tile stored n-major for TN (rows = n, cols = k, as A), k-major for NN (rows = k, cols = n)
  static constexpr int B_ROWS = TN ? BN : BK;
  static constexpr int B_CPR = TN ? BK / 8 : BN / 8;
  static constexpr int A_STAGE_BYTES = BM * BK * 2;
  static constexpr int B_STAGE_BYTES = BK * BN * 2;
  static constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;   // the launch's dynamic shared memory
  // Misaligned path: hold the next tile in registers across the mma work (hides its latency) only
  // when the accumulators leave room; big warp tiles load and store at once to avoid spills.
  static constexpr bool FETCH_AHEAD = MI * NI * 4 <= 32;
  // One aligned + one misaligned operand (N % 8 != 0 or K % 8 != 0 but not both in NN) gets its own
  // instantiation so the aligned operand keeps cp.async; with 128 accumulators the extra code paths
  // push the kernel past the launch-bounds register cap, so big warp tiles take the all-guarded path.
  static constexpr bool MIXED_PATHS = MI * NI * 4 <= 32;

  static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0 && WTM % 16 == 0 && WTN % 16 == 0,
                "warp tiles must be multiples of 16 x 16");
  static_assert(BK == 32 || BK == 64, "BK must be 32 or 64");
  static_assert(STAGES >= 2, "the ring needs 2 or more stages");
};

// Moves an R x (CPR*8) tile of a row-major matrix (leading dimension ld, valid extent rlim x clim)
// into a swizzled smem tile. Chunk q of the tile belongs to thread q % NT.
template <int NT, int R, int CPR, MisalignedLoads LOADS = MisalignedLoads::pair>
struct TileLoader {
  static constexpr int ITERS = R * CPR / NT;
  static_assert(R * CPR % NT == 0, "tile chunks must divide evenly among threads");

  // Aligned path: one cp.async per chunk; out-of-range chunks are zero-filled. Requires clim % 8 == 0
  // and ld % 8 == 0, so a chunk is either wholly inside or wholly outside the matrix.
  __device__ static void async(uint32_t s, const __half* g, int row0, int col0, int rlim, int clim, int ld) {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int q = threadIdx.x + i * NT, r = q / CPR, c = q % CPR;
      const int gr = row0 + r, gc = col0 + c * 8;
      const bool p = gr < rlim && gc < clim;
      const __half* src = p ? g + (long long)gr * ld + gc : g;
      cp_async16(s + swizzle_offset<CPR>(r, c), src, p);
    }
  }
  // Misaligned path, part 1: guarded loads into registers (issued before the mma work of the
  // current stage so their latency overlaps it).
  __device__ static void fetch(uint4 (&v)[ITERS], const __half* g, int row0, int col0, int rlim, int clim, int ld) {
    const unsigned short* gs = reinterpret_cast<const unsigned short*>(g);
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int q = threadIdx.x + i * NT, r = q / CPR, c = q % CPR;
      const int gr = row0 + r, gc = col0 + c * 8;
      const unsigned short* src = gs + (long long)gr * ld + gc;   // pair: never dereferenced itself
      if constexpr (LOADS == MisalignedLoads::pair) v[i] = load_chunk_pair(src, gr < rlim ? min(8, clim - gc) : 0);
      else v[i] = load_chunk_elems(src, gr < rlim, gc, clim);
    }
  }
  // Misaligned path, part 2: 16-byte stores into the same swizzled layout the aligned path uses.
  __device__ static void store(unsigned char* s, const uint4 (&v)[ITERS]) {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int q = threadIdx.x + i * NT;
      *reinterpret_cast<uint4*>(s + swizzle_offset<CPR>(q / CPR, q % CPR)) = v[i];
    }
  }
};

// One CTA's operands: this batch entry's A (M x K) and B (K x N for NN, N x K for TN), and its tile origin.
struct Operands {
  const __half* A;
  const __half* B;
  int M, N, K, m0, n0;
};

template <class Tile>
struct MmaSyncGemm {
  static constexpr int NT = Tile::NT, BM = Tile::BM, BN = Tile::BN, BK = Tile::BK, STAGES = Tile::STAGES;
  static constexpr int MI = Tile::MI, NI = Tile::NI, A_CPR = Tile::A_CPR, B_CPR = Tile::B_CPR;
  static constexpr int STAGE_BYTES = Tile::STAGE_BYTES, A_STAGE_BYTES = Tile::A_STAGE_BYTES;
  static constexpr bool TN = Tile::TN, FETCH_AHEAD = Tile::FETCH_AHEAD;
  using LoadA = TileLoader<NT, BM, A_CPR, Tile::LOADS>;
  using LoadB = TileLoader<NT, Tile::B_ROWS, B_CPR, Tile::LOADS>;
  using Acc = float[MI][NI][4];

  __device__ __forceinline__ static void load_a_async(uint32_t s, const Operands& o, int k0) {
    LoadA::async(s, o.A, o.m0, k0, o.M, o.K, o.K);
  }
  __device__ __forceinline__ static void load_b_async(uint32_t s, const Operands& o, int k0) {
    if constexpr (TN) LoadB::async(s, o.B, o.n0, k0, o.N, o.K, o.K);
    else LoadB::async(s, o.B, k0, o.n0, o.K, o.N, o.N);
  }
  __device__ __forceinline__ static void fetch_a(uint4 (&v)[LoadA::ITERS], const Operands& o, int k0) {
    LoadA::fetch(v, o.A, o.m0, k0, o.M, o.K, o.K);
  }
  __device__ __forceinline__ static void fetch_b(uint4 (&v)[LoadB::ITERS], const Operands& o, int k0) {
    if constexpr (TN) LoadB::fetch(v, o.B, o.n0, k0, o.N, o.K, o.K);
    else LoadB::fetch(v, o.B, k0, o.n0, o.K, o.N, o.N);
  }

  // Per-lane ldmatrix byte offsets inside a stage, computed once: the offset of fragment mi (A),
  // nj (TN B) or k-step ks (NN B) is the base offset plus a compile-time constant (swizzle_offset).
  struct FragOffsets {
    uint32_t a[BK / 16];
    uint32_t b[TN ? BK / 16 : NI / 2];
    __device__ __forceinline__ FragOffsets(int wm, int wn, int lane) {
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks)
        // lanes 0-15 address rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15: a0..a3 in mma order.
        a[ks] = swizzle_offset<A_CPR>(wm * Tile::WTM + (lane & 15), ks * 2 + (lane >> 4));
      if constexpr (TN) {
        // smem rows are n: matrices (n0-7,k0-7), (n0-7,k8-15), (n8-15,k0-7), (n8-15,k8-15) = b0,b1 of two n8 blocks.
#pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks)
          b[ks] = swizzle_offset<B_CPR>(wn * Tile::WTN + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1));
      } else {
        // smem rows are k: the same four 8x8 matrices, transposed on load into the col-major B fragment.
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj)
          b[nj] = swizzle_offset<B_CPR>((lane & 7) + (((lane >> 3) & 1) << 3), (wn * Tile::WTN + nj * 16) / 8 + (lane >> 4));
      }
    }
  };

  // All BK/16 k-steps of one smem stage for this warp's WTM x WTN sub-tile.
  __device__ __forceinline__ static void compute_stage(Acc& acc, uint32_t sA, uint32_t sB, const FragOffsets& off) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      uint32_t a[MI][4];
      uint32_t b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) ldsm_x4(a[mi], sA + off.a[ks] + mi * 16 * A_CPR * 16);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t t[4];
        if constexpr (TN) ldsm_x4(t, sB + off.b[ks] + nj * 16 * B_CPR * 16);
        else ldsm_x4_trans(t, sB + off.b[nj] + ks * 16 * B_CPR * 16);
        b[2 * nj][0] = t[0]; b[2 * nj][1] = t[1];
        b[2 * nj + 1][0] = t[2]; b[2 * nj + 1][1] = t[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_m16n8k16(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  }

  // The STAGES-deep main loop over k tiles [kt0, kt0 + nk). VA / VB: operand A / B takes the aligned
  // cp.async path; otherwise the guarded register path. `wait_group(STAGES-2)` + one __syncthreads
  // per k tile, which also protects the stage being refilled.
  template <bool VA, bool VB>
  __device__ __forceinline__ static void mainloop(Acc& acc, unsigned char* smem, const Operands& o, int kt0, int nk) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / Tile::WARPS_N, wn = warp % Tile::WARPS_N;
    const uint32_t sbase = smem_u32(smem);
    const FragOffsets off(wm, wn, lane);
    uint4 ra[VA ? 1 : LoadA::ITERS];
    uint4 rb[VB ? 1 : LoadB::ITERS];

    // Prologue: stages 0..STAGES-2. One commit per stage even when empty keeps the group count exact.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) {
        const int k0 = (kt0 + s) * BK;
        const uint32_t sa = sbase + s * STAGE_BYTES, sb = sa + A_STAGE_BYTES;
        if constexpr (VA) load_a_async(sa, o, k0);
        else { uint4 v[LoadA::ITERS]; fetch_a(v, o, k0); LoadA::store(smem + s * STAGE_BYTES, v); }
        if constexpr (VB) load_b_async(sb, o, k0);
        else { uint4 v[LoadB::ITERS]; fetch_b(v, o, k0); LoadB::store(smem + s * STAGE_BYTES + A_STAGE_BYTES, v); }
      }
      cp_async_commit();
    }

    for (int kt = 0; kt < nk; ++kt) {
      // Groups committed so far: STAGES-1+kt. Allowing STAGES-2 in flight means tile kt has landed.
      cp_async_wait<STAGES - 2>();
      // Also guarantees every warp is done reading stage (kt-1) % STAGES, which is refilled below.
      __syncthreads();
      const int next = kt + STAGES - 1;
      const int ns = next % STAGES;
      const bool more = next < nk;
      if (more) {
        const int k0 = (kt0 + next) * BK;
        const uint32_t sa = sbase + ns * STAGE_BYTES, sb = sa + A_STAGE_BYTES;
        if constexpr (VA) load_a_async(sa, o, k0);
        else if constexpr (FETCH_AHEAD) fetch_a(ra, o, k0);
        else { fetch_a(ra, o, k0); LoadA::store(smem + ns * STAGE_BYTES, ra); }
        if constexpr (VB) load_b_async(sb, o, k0);
        else if constexpr (FETCH_AHEAD) fetch_b(rb, o, k0);
        else { fetch_b(rb, o, k0); LoadB::store(smem + ns * STAGE_BYTES + A_STAGE_BYTES, rb); }
      }
      cp_async_commit();
      const int cs = kt % STAGES;
      compute_stage(acc, sbase + cs * STAGE_BYTES, sbase + cs * STAGE_BYTES + A_STAGE_BYTES, off);
      if (FETCH_AHEAD && more) {
        // Stage ns is distinct from cs (STAGES >= 2) and nobody reads it until after the next barrier.
        if constexpr (!VA) LoadA::store(smem + ns * STAGE_BYTES, ra);
        if constexpr (!VB) LoadB::store(smem + ns * STAGE_BYTES + A_STAGE_BYTES, rb);
      }
    }
    cp_async_wait<0>();
  }

  // Accumulator layout of m16n8: lane (g = lane/4, t = lane%4) holds rows g and g+8, cols 2t, 2t+1.
  // fp16 C tile, rows >= M and cols >= N skipped (Cb: this batch entry's C).
  __device__ __forceinline__ static void store_tile(const Acc& acc, __half* Cb, int M, int N, int row_base, int col_base,
                                                    bool pair) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row_base + mi * 16 + h * 8;
        if (r >= M) continue;   // the whole quad: its lanes share r
        __half* crow = Cb + (long long)r * N;
        if (pair) {
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int c = col_base + ni * 8;
            store_half2(crow + c, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], c, N, true);
          }
        } else {   // rows at any 2-byte alignment: one 4-byte store a lane a block all the same
          store_row_pairs<NI>(crow, col_base, N, lane, [&](int ni) {
            return make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
          });
        }
      }
  }

  // Split-K (gridDim.y > 1): this CTA's fp32 partials are added atomically into the zero-filled
  // workspace (batch * M * N floats; an empty share, nk == 0, adds nothing), then it arrives on the
  // tile's counter (ints after the floats, hgemm::splitk_arrive_last); the CTA arriving last converts
  // the tile to fp16, clearing the partials and the counter as it goes, so the workspace is zero
  // again when the kernel exits. Every split of a tile must arrive, empty ones included.
  // (tm, tn): the tile of tiles_m x tiles_n of batch entry bz.
  __device__ __forceinline__ static void splitk_epilogue(const Acc& acc, const Operands& o, void* workspace, __half* Cb,
                                                         long long bz, int batch, int nk, int row_base, int col_base,
                                                         int tiles_m, int tiles_n, int tm, int tn) {
    const int M = o.M, N = o.N;
    float* ws = reinterpret_cast<float*>(workspace) + bz * M * N;
    if (nk > 0) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = row_base + mi * 16 + h * 8, c = col_base + ni * 8;
            if (r >= M) continue;
            float* dst = ws + (long long)r * N + c;
            if (c < N) atomicAdd(dst, acc[mi][ni][2 * h]);
            if (c + 1 < N) atomicAdd(dst + 1, acc[mi][ni][2 * h + 1]);
          }
    }
    const long long tile = bz * tiles_m * tiles_n + tm * tiles_n + tn;
    if (!splitk_arrive_last(workspace, (long long)batch * M * N, tile)) return;
    splitk_take_tile<NT, BM, BN>(ws, Cb, o.m0, o.n0, M, N);
    splitk_reset(workspace, (long long)batch * M * N, tile);  // the workspace as the launch found it
  }

  // The whole kernel: tile (grouped rasterisation over blockIdx.x), batch entry (blockIdx.z), k share
  // (blockIdx.y of gridDim.y splits), main loop, epilogue.
  __device__ __forceinline__ static void run(const __half* __restrict__ A, const __half* __restrict__ B,
                                             __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    // Grouped rasterisation over blockIdx.x (the arithmetic of hgemm::grouped_tile) and this CTA's
    // split-K share of the k tiles (that of hgemm::k_tile_range), written out in the kernel body.
    const int pid = blockIdx.x;
    const int per_group = Tile::GROUP_M * tiles_n;
    const int first_m = (pid / per_group) * Tile::GROUP_M;
    const int group_rows = min(tiles_m - first_m, Tile::GROUP_M);
    const int tm = first_m + (pid % per_group) % group_rows;
    const int tn = (pid % per_group) / group_rows;

    const long long bz = blockIdx.z;
    Operands o;
    o.A = A + bz * M * K;
    o.B = B + bz * K * N;
    o.M = M; o.N = N; o.K = K;
    o.m0 = tm * BM; o.n0 = tn * BN;

    const int ktiles = (K + BK - 1) / BK;
    const int per_split = (ktiles + gridDim.y - 1) / gridDim.y;
    const int kt0 = blockIdx.y * per_split;
    const int nk = max(0, min(ktiles, kt0 + per_split) - kt0);

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

    // The main loop for the operands' alignment, picked at run time: 16-byte cp.async needs row
    // pitches that are multiples of 8 halves and 16-byte aligned base pointers.
    const bool va = (K % 8 == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
    const bool vb = (TN ? K % 8 == 0 : N % 8 == 0) && (reinterpret_cast<uintptr_t>(B) % 16 == 0);
    if (va && vb) {
      mainloop<true, true>(acc, smem, o, kt0, nk);
    } else if constexpr (Tile::MIXED_PATHS) {
      if (va) mainloop<true, false>(acc, smem, o, kt0, nk);
      else if (vb) mainloop<false, true>(acc, smem, o, kt0, nk);
      else mainloop<false, false>(acc, smem, o, kt0, nk);
    } else {
      mainloop<false, false>(acc, smem, o, kt0, nk);
    }

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / Tile::WARPS_N, wn = warp % Tile::WARPS_N;
    const int row_base = o.m0 + wm * Tile::WTM + (lane >> 2);
    const int col_base = o.n0 + wn * Tile::WTN + (lane & 3) * 2;
    __half* Cb = C + bz * M * N;

    if (gridDim.y == 1) {
      store_tile(acc, Cb, M, N, row_base, col_base, (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 4 == 0));
      return;
    }
    splitk_epilogue(acc, o, workspace, Cb, bz, batch, nk, row_base, col_base, tiles_m, tiles_n, tm, tn);
  }
};

}  // namespace hgemm

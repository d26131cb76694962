"""Tensor-core mma.sync HGEMM family (sm_80+; compiled for sm_90a).

One CTA computes a BM x BN tile of C for one batch entry and one K range. Operands stream through a
STAGES-deep cp.async ring of XOR-swizzled shared-memory tiles; warps read m16n8k16 fragments with
ldmatrix (.trans for a k-major B in NN) and accumulate in fp32 registers.

Any M, N, K works without padding copies:
  * rows/cols/k outside the problem are zero-filled (cp.async src-size 0), so edge tiles are exact;
  * when a row stride is not a multiple of 8 halves (K % 8 for A and TN-B, N % 8 for NN-B) or a base
    pointer is not 16-byte aligned, 16-byte loads would be misaligned; the kernel then picks, at run
    time and per operand, a guarded element-wise path that loads into registers one stage ahead and
    stores 16-byte chunks to the same swizzled layout (a separate template instantiation, so the
    aligned path pays nothing for it);
  * C is written with half2 stores when N is even and C is 4-byte aligned, else element-wise.

Split-K (SPLIT_K > 1): grid.y = min(SPLIT_K, k tiles). Each CTA adds its fp32 partial tile into a
zero-filled fp32 workspace with atomics, then bumps a per-tile counter; the CTA that arrives last
converts the tile to fp16. The workspace is zeroed before every launch by the harness contract, so
no clean-up pass is needed.

`variants()` enumerates parameter dicts that compile without spills; `render(params)` returns the
candidate text; `applicable(params, problem)` is a cheap pre-filter for the tuner.
"""

from __future__ import annotations

import itertools

from .realign import REALIGN16

SMEM_LIMIT = 227 * 1024

# (BM, BN, BK, WARPS_M, WARPS_N, MIN_BLOCKS). Warp tiles of 32..64 x 32..64 give each warp enough
# mma work per ldmatrix. MIN_BLOCKS is the CTAs-per-SM promise to ptxas (__launch_bounds__), which caps
# registers at 64K / (MIN_BLOCKS * threads); the values are the largest that ptxas 13.0 compiles
# without spills for both layouts (8-warp 128x128: 128 regs, 2 CTAs/SM; 128 accumulators: 1 CTA/SM).
TILES = [
    (128, 128, 32, 2, 4, 2),
    (128, 256, 32, 2, 4, 1),
    (256, 128, 32, 4, 2, 1),
    (128, 64, 32, 2, 2, 2),
    (64, 128, 32, 2, 2, 3),
    (64, 128, 64, 2, 2, 2),
    (64, 64, 64, 2, 2, 2),
    (64, 64, 32, 2, 2, 3),
    # Skinny M (<= 32) with split-K: one warp row, B streamed through the ring at bandwidth.
    (16, 128, 64, 1, 4, 3),
    (32, 128, 64, 1, 4, 2),
]
# (tile, stages) pairs where the table's MIN_BLOCKS spilled a few bytes with ptxas 13.0: one CTA fewer.
SPILL_FALLBACK = {(128, 128, 32, 2, 4, 2), (128, 128, 32, 2, 4, 4)}
STAGES = (2, 3, 4)
SPLIT_K = (1, 2, 4, 8, 16)
GROUP_M = (8,)


def _smem_bytes(p: dict) -> int:
    return p["stages"] * (p["bm"] * p["bk"] + p["bk"] * p["bn"]) * 2


def _acc_regs(p: dict) -> int:
    return (p["bm"] // p["warps_m"]) * (p["bn"] // p["warps_n"]) // 32


def _min_blocks(p: dict) -> int:
    want = p["min_blocks"]
    if (p["bm"], p["bn"], p["bk"], p["warps_m"], p["warps_n"], p["stages"]) in SPILL_FALLBACK:
        want -= 1
    while want > 1 and want * _smem_bytes(p) > SMEM_LIMIT:
        want -= 1
    return max(1, want)


def _valid(p: dict) -> bool:
    bm, bn, bk, wm, wn = p["bm"], p["bn"], p["bk"], p["warps_m"], p["warps_n"]
    nt = 32 * wm * wn
    wtm, wtn = bm // wm, bn // wn
    return (
        bm % wm == 0 and bn % wn == 0 and wtm % 16 == 0 and wtn % 16 == 0
        and bk in (32, 64)
        and (bm * bk // 8) % nt == 0 and (bk * bn // 8) % nt == 0
        and _smem_bytes(p) <= SMEM_LIMIT
        and _acc_regs(p) <= 128
    )


def variants() -> list[dict]:
    out = []
    for (bm, bn, bk, wm, wn, mb), st, sk, g in itertools.product(TILES, STAGES, SPLIT_K, GROUP_M):
        p = dict(bm=bm, bn=bn, bk=bk, warps_m=wm, warps_n=wn, min_blocks=mb, stages=st, split_k=sk, group_m=g,
                 misaligned_loads="pair")
        # Split-K pays off only when the tile grid is small, i.e. for the smaller tiles.
        if sk > 1 and bm * bn > 128 * 128:
            continue
        if sk == 16 and bm > 32:   # 16-way splits only for the skinny tiles
            continue
        if _valid(p):
            out.append(p)
    return out


def name(p: dict) -> str:
    return (f"{p.get('prefix', 'mma_sync')}_{p['bm']}x{p['bn']}x{p['bk']}_w{p['warps_m']}x{p['warps_n']}"
            f"_s{p['stages']}_g{p['group_m']}_sk{p['split_k']}" + ("_mp" if _pair_loads(p) else ""))


def _pair_loads(p: dict) -> bool:
    # misaligned rows: 2 aligned 16-byte loads + realignment per chunk ("pair"), or 8 element loads
    # ("elem"). On the 11 misaligned default-grid shapes pair is faster in geomean for each of the 4
    # tilings timed (1.09-1.33x), so variants() uses it; aligned rows take the cp.async path either way.
    return p.get("misaligned_loads", "elem") == "pair"


def applicable(p: dict, problem) -> bool:
    """Heuristic pre-filter: split-K only when the tile grid underfills 132 SMs and K is long."""
    tiles = -(-problem.M // p["bm"]) * -(-problem.N // p["bn"]) * problem.batch
    if p["split_k"] > 1:
        return tiles < 132 and problem.K >= 256 * p["split_k"] and problem.M * problem.N * problem.batch <= 1 << 26
    # Huge tiles on tiny problems waste most of the CTA.
    return p["bm"] * p["bn"] <= 64 * 64 * 4 or tiles >= 66


def spec_text(p: dict) -> str:
    nt = 32 * p["warps_m"] * p["warps_n"]
    tiles = f"cdiv(M, {p['bm']}) * cdiv(N, {p['bn']})"
    if p["split_k"] > 1:
        grid = f"{tiles}, min({p['split_k']}, cdiv(K, {p['bk']})), batch"
        workspace = f"batch * M * N * 4 + batch * {tiles} * 4"
    else:
        grid = f"{tiles}, 1, batch"
        workspace = "0"
    return "\n".join([
        "/*@launch",
        f"entry: {name(p)}",
        f"block: {nt}",
        f"grid: {grid}",
        f"smem: {_smem_bytes(p)}",
        f"workspace: {workspace}",
        "layouts: NN, TN",
        "@*/",
    ])


_BODY = r"""
namespace {

constexpr int NT = WARPS_M * WARPS_N * 32;
constexpr int WTM = BM / WARPS_M;   // warp tile rows
constexpr int WTN = BN / WARPS_N;   // warp tile cols
constexpr int MI = WTM / 16;        // m16 fragments per warp
constexpr int NI = WTN / 8;         // n8 fragments per warp (even: ldmatrix.x4 loads two)
constexpr int A_CPR = BK / 8;       // 16-byte chunks per A smem row (rows = m, cols = k)
#ifdef HGEMM_LAYOUT_TN
constexpr int B_ROWS = BN;          // B tile stored n-major: rows = n, cols = k (same as A)
constexpr int B_CPR = BK / 8;
#else
constexpr int B_ROWS = BK;          // B tile stored k-major: rows = k, cols = n
constexpr int B_CPR = BN / 8;
#endif
constexpr int A_STAGE_BYTES = BM * BK * 2;
constexpr int B_STAGE_BYTES = BK * BN * 2;
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
// Misaligned path: hold the next tile in registers across the mma work (hides its latency) only
// when the accumulators leave room; big warp tiles load and store at once to avoid spills.
constexpr bool FETCH_AHEAD = MI * NI * 4 <= 32;
// One aligned + one misaligned operand (N % 8 != 0 or K % 8 != 0 but not both in NN) gets its own
// instantiation so the aligned operand keeps cp.async; with 128 accumulators the extra code paths
// push the combined kernel past the launch-bounds register cap, so big warp tiles take the all-guarded path instead.
constexpr bool MIXED_PATHS = MI * NI * 4 <= 32;

// Swizzled byte offset of 16-byte chunk `c` of row `r` in a tile with CPR chunks per row.
// ldmatrix reads one chunk column from 8 consecutive rows; XOR-ing the chunk index with the row
// bits puts those 8 reads in 8 different 16-byte bank groups (no conflicts). With 4 chunks per row
// two rows share a 128-byte line, so the row bits are taken one position higher.
template <int CPR>
__device__ __forceinline__ int swz(int r, int c) {
  static_assert(CPR == 4 || CPR % 8 == 0, "swizzle needs 4 or a multiple of 8 chunks per row");
  if constexpr (CPR == 4) return (r * 4 + (c ^ ((r >> 1) & 3))) * 16;
  else return (r * CPR + (c ^ (r & 7))) * 16;
}

#ifdef MISALIGNED_PAIR
REALIGN16
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  // src-size 0 zero-fills the 16 bytes without reading global memory.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Moves an R x (CPR*8) tile of a row-major matrix (leading dimension ld, valid extent rlim x clim)
// into a swizzled smem tile. Chunk q of the tile belongs to thread q % NT.
template <int R, int CPR>
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
      cp_async16(s + swz<CPR>(r, c), src, p);
    }
  }
  // Misaligned path, part 1: guarded element loads into registers (issued before the mma work of
  // the current stage so their latency overlaps it).
  __device__ static void fetch(uint4 (&v)[ITERS], const __half* g, int row0, int col0, int rlim, int clim, int ld) {
    const unsigned short* gs = reinterpret_cast<const unsigned short*>(g);
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int q = threadIdx.x + i * NT, r = q / CPR, c = q % CPR;
      const int gr = row0 + r, gc = col0 + c * 8;
#ifdef MISALIGNED_PAIR
      // two aligned 16-byte loads and a register realignment instead of 8 element loads
      const unsigned short* src = gs + (long long)gr * ld + gc;   // never dereferenced itself
      const int keep = gr < rlim ? min(8, clim - gc) : 0;
      const uint32_t off = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(src) & 15);
      const uint4* blk = reinterpret_cast<const uint4*>(reinterpret_cast<uintptr_t>(src) - off);
      const int nblk = pair_blocks(off, keep);
      uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
      if (nblk > 0) lo = __ldg(blk);
      if (nblk > 1) hi = __ldg(blk + 1);
      v[i] = realign16(lo, hi, off, keep);
#else
      unsigned short h[8];
      const unsigned short* src = gs + (long long)gr * ld + gc;
#pragma unroll
      for (int e = 0; e < 8; ++e) h[e] = (gr < rlim && gc + e < clim) ? __ldg(src + e) : (unsigned short)0;
      v[i] = make_uint4(h[0] | (uint32_t(h[1]) << 16), h[2] | (uint32_t(h[3]) << 16),
                        h[4] | (uint32_t(h[5]) << 16), h[6] | (uint32_t(h[7]) << 16));
#endif
    }
  }
  // Misaligned path, part 2: 16-byte stores into the same swizzled layout the aligned path uses.
  __device__ static void store(unsigned char* s, const uint4 (&v)[ITERS]) {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int q = threadIdx.x + i * NT;
      *reinterpret_cast<uint4*>(s + swz<CPR>(q / CPR, q % CPR)) = v[i];
    }
  }
};

using LoadA = TileLoader<BM, A_CPR>;
using LoadB = TileLoader<B_ROWS, B_CPR>;

struct Operands {
  const __half* A;   // this batch entry's A (M x K)
  const __half* B;   // this batch entry's B (K x N for NN, N x K for TN)
  int M, N, K, m0, n0;
};

__device__ __forceinline__ void load_a_async(uint32_t s, const Operands& o, int k0) {
  LoadA::async(s, o.A, o.m0, k0, o.M, o.K, o.K);
}
__device__ __forceinline__ void load_b_async(uint32_t s, const Operands& o, int k0) {
#ifdef HGEMM_LAYOUT_TN
  LoadB::async(s, o.B, o.n0, k0, o.N, o.K, o.K);
#else
  LoadB::async(s, o.B, k0, o.n0, o.K, o.N, o.N);
#endif
}
__device__ __forceinline__ void fetch_a(uint4 (&v)[LoadA::ITERS], const Operands& o, int k0) {
  LoadA::fetch(v, o.A, o.m0, k0, o.M, o.K, o.K);
}
__device__ __forceinline__ void fetch_b(uint4 (&v)[LoadB::ITERS], const Operands& o, int k0) {
#ifdef HGEMM_LAYOUT_TN
  LoadB::fetch(v, o.B, o.n0, k0, o.N, o.K, o.K);
#else
  LoadB::fetch(v, o.B, k0, o.n0, o.K, o.N, o.N);
#endif
}

// Per-lane ldmatrix byte offsets inside a stage, computed once. Adding a multiple of 16 rows to a
// tile row leaves the swizzle's row bits ((r & 7) or (r >> 1) & 3) unchanged, so the offset of
// fragment mi (A), nj (TN B) or k-step ks (NN B) is the base offset plus a compile-time constant.
#ifdef HGEMM_LAYOUT_TN
constexpr int B_OFFS = BK / 16;
#else
constexpr int B_OFFS = NI / 2;
#endif
struct FragOffsets {
  uint32_t a[BK / 16];
  uint32_t b[B_OFFS];
  __device__ __forceinline__ FragOffsets(int wm, int wn, int lane) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks)
      // lanes 0-15 address rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15: a0..a3 in mma order.
      a[ks] = swz<A_CPR>(wm * WTM + (lane & 15), ks * 2 + (lane >> 4));
#ifdef HGEMM_LAYOUT_TN
    // smem rows are n: matrices (n0-7,k0-7), (n0-7,k8-15), (n8-15,k0-7), (n8-15,k8-15) = b0,b1 of two n8 blocks.
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks)
      b[ks] = swz<B_CPR>(wn * WTN + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1));
#else
    // smem rows are k: the same four 8x8 matrices, transposed on load into the col-major B fragment.
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj)
      b[nj] = swz<B_CPR>((lane & 7) + (((lane >> 3) & 1) << 3), (wn * WTN + nj * 16) / 8 + (lane >> 4));
#endif
  }
};

// All BK/16 k-steps of one smem stage for this warp's WTM x WTN sub-tile.
__device__ __forceinline__ void compute_stage(float (&acc)[MI][NI][4], uint32_t sA, uint32_t sB, const FragOffsets& off) {
#pragma unroll
  for (int ks = 0; ks < BK / 16; ++ks) {
    uint32_t a[MI][4];
    uint32_t b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) ldsm_x4(a[mi], sA + off.a[ks] + mi * 16 * A_CPR * 16);
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
      uint32_t t[4];
#ifdef HGEMM_LAYOUT_TN
      ldsm_x4(t, sB + off.b[ks] + nj * 16 * B_CPR * 16);
#else
      ldsm_x4_trans(t, sB + off.b[nj] + ks * 16 * B_CPR * 16);
#endif
      b[2 * nj][0] = t[0]; b[2 * nj][1] = t[1];
      b[2 * nj + 1][0] = t[2]; b[2 * nj + 1][1] = t[3];
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma16816(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
  }
}

// The STAGES-deep main loop over k tiles [kt0, kt0 + nk). VA / VB: operand A / B takes the aligned
// cp.async path; otherwise the guarded register path.
template <bool VA, bool VB>
__device__ __forceinline__ void mainloop(float (&acc)[MI][NI][4], unsigned char* smem, const Operands& o, int kt0, int nk) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
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

}  // namespace

extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
ENTRY(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
      int M, int N, int K, int batch, void* workspace) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;

  // Grouped rasterisation: consecutive CTAs walk GROUP_M tile-rows column by column, so the A rows
  // and B columns they share stay resident in L2.
  const int pid = blockIdx.x;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int tm = first_m + (pid % per_group) % group_rows;
  const int tn = (pid % per_group) / group_rows;

  const long long bz = blockIdx.z;
  Operands o;
  o.A = A + bz * M * K;
  o.B = B + bz * K * N;
  o.M = M; o.N = N; o.K = K;
  o.m0 = tm * BM; o.n0 = tn * BN;

  // This CTA's share of the k tiles (split-K over grid.y; trailing splits may be empty).
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

  const bool va = (K % 8 == 0) && (reinterpret_cast<uintptr_t>(A) % 16 == 0);
#ifdef HGEMM_LAYOUT_TN
  const bool vb = (K % 8 == 0) && (reinterpret_cast<uintptr_t>(B) % 16 == 0);
#else
  const bool vb = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(B) % 16 == 0);
#endif
  if (va && vb) {
    mainloop<true, true>(acc, smem, o, kt0, nk);
  } else if constexpr (MIXED_PATHS) {
    if (va) mainloop<true, false>(acc, smem, o, kt0, nk);
    else if (vb) mainloop<false, true>(acc, smem, o, kt0, nk);
    else mainloop<false, false>(acc, smem, o, kt0, nk);
  } else {
    mainloop<false, false>(acc, smem, o, kt0, nk);
  }

  // Accumulator layout of m16n8: lane (g = lane/4, t = lane%4) holds rows g and g+8, cols 2t, 2t+1.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int row_base = o.m0 + wm * WTM + (lane >> 2);
  const int col_base = o.n0 + wn * WTN + (lane & 3) * 2;
  __half* Cb = C + bz * M * N;

  if (gridDim.y == 1) {
    const bool pair = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 4 == 0);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row_base + mi * 16 + h * 8, c = col_base + ni * 8;
          if (r >= M) continue;
          __half* dst = Cb + (long long)r * N + c;
          const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
          if (pair && c < N) {   // N even and c even: c < N implies c + 1 < N
            *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
          } else {
            if (c < N) dst[0] = __float2half_rn(v0);
            if (c + 1 < N) dst[1] = __float2half_rn(v1);
          }
        }
    return;
  }

  // Split-K: fp32 partials into the zero-filled workspace, then the last CTA of the tile converts.
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
  __shared__ int is_last;
  // Make this CTA's partials visible device-wide before announcing arrival.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counters = reinterpret_cast<int*>(reinterpret_cast<float*>(workspace) + (long long)batch * M * N);
    const int prev = atomicAdd(counters + bz * tiles_m * tiles_n + tm * tiles_n + tn, 1);
    is_last = (prev == (int)gridDim.y - 1);
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int i = threadIdx.x; i < BM * BN; i += NT) {
    const int r = o.m0 + i / BN, c = o.n0 + i % BN;
    if (r < M && c < N) Cb[(long long)r * N + c] = __float2half_rn(__ldcg(ws + (long long)r * N + c));
  }
}
"""


def render(p: dict) -> str:
    consts = "\n".join([
        f"constexpr int BM = {p['bm']}, BN = {p['bn']}, BK = {p['bk']};",
        f"constexpr int WARPS_M = {p['warps_m']}, WARPS_N = {p['warps_n']};",
        f"constexpr int STAGES = {p['stages']};",
        f"constexpr int GROUP_M = {p['group_m']};",
        f"constexpr int MIN_BLOCKS = {_min_blocks(p)};",
        *(["#define MISALIGNED_PAIR 1"] if _pair_loads(p) else []),
    ])
    header = (
        f"// HGEMM, tensor-core mma.sync m16n8k16 (fp32 accumulate): {p['bm']}x{p['bn']}x{p['bk']} CTA tile,\n"
        f"// {p['warps_m']}x{p['warps_n']} warps, {p['stages']}-stage cp.async ring, swizzled smem, ldmatrix,\n"
        f"// grouped rasterisation (GROUP_M={p['group_m']}), "
        + (f"split-K up to {p['split_k']} via fp32 workspace atomics.\n" if p["split_k"] > 1 else "no split-K.\n")
        + "// Any M, N, K: zero-filled edge tiles; a guarded element path when rows are not 16-byte aligned.\n"
    )
    return (header + "#include <cuda_fp16.h>\n#include <stdint.h>\n\n" + spec_text(p) + "\n\n"
            + consts + "\n" + _BODY.replace("REALIGN16", REALIGN16).replace("ENTRY(", name(p) + "("))

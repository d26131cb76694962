// HGEMM for Hopper (sm_90a): wgmma.mma_async m64n64k16 (fp32 accumulate) from 128B-swizzled smem,
// 128x64x64 CTA tile, TMA loads into a 6-stage full/empty mbarrier ring,
// 1 producer warpgroup + 1 consumer warpgroup(s), persistent grid with grouped
// rasterisation (GROUP_M=8). Needs 16-byte TMA row pitches (K % 8, and N % 8 for NN).
#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

/*@launch
entry: wgmma_128x64x64_c1_s6_g8
block: 256
grid: min(num_sms, cdiv(M, 128) * cdiv(N, 64) * batch)
smem: 148480
workspace: 0
layouts: NN, TN
tensor_map: A, box=(128, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
@*/

constexpr int BM = 128, BN = 64;
#define CONSUMERS 1
constexpr int STAGES = 6;
constexpr int GROUP_M = 8;

namespace {

constexpr int BK = 64;                      // 64 fp16 = 128 bytes: exactly one 128B-swizzle row
constexpr int NUM_THREADS = 128 * (CONSUMERS + 1);
constexpr int WM = BM / CONSUMERS;          // rows of the tile owned by one consumer warpgroup
constexpr int MT = WM / 64;                 // m64 wgmma atoms per consumer warpgroup
constexpr int A_BYTES = BM * BK * 2;        // A stage: BM rows x 128 bytes (one TMA box)
constexpr int BOX_BYTES = 64 * 64 * 2;      // B stage: BN / 64 boxes of 64 x 64 fp16
constexpr int B_BOXES = BN / 64;
constexpr int STAGE_BYTES = A_BYTES + B_BOXES * BOX_BYTES;
#if CONSUMERS > 1
// setmaxnreg budget: 128 * 40 + 2 * 128 * 232 = 64512 <= 65536 registers of the SM.
constexpr int PRODUCER_REGS = 40;
constexpr int CONSUMER_REGS = 232;
#endif
static_assert(A_BYTES % 1024 == 0 && STAGE_BYTES % 1024 == 0, "stages must keep 1024-byte alignment");
static_assert(MT >= 1 && MT * 64 == WM && BN % 64 == 0 && BN <= 256, "tile shape");

#ifdef HGEMM_LAYOUT_TN
constexpr int TRANS_B = 0;   // B stored N x K: K-major operand
#else
constexpr int TRANS_B = 1;   // B stored K x N: N-major (MN-major) operand
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- mbarriers
// A barrier's phase starts at 0. try_wait.parity(P) succeeds once the phase with parity P has
// completed, i.e. when the barrier's current phase parity != P; on a fresh barrier parity 1 counts
// as the (virtual) completed phase before phase 0, so a wait on parity 1 returns at once.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// One arrival plus `bytes` of expected transaction count; TMA's complete_tx retires the bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

// ---------------------------------------------------------------- TMA
// The harness encodes each operand as a 3-D tensor: dim0 = columns (contiguous), dim1 = rows,
// dim2 = batch; box = (64 or BM rows) x 64 columns x 1; 128B swizzle; out-of-range elements are
// written as zeros and still count towards the transaction bytes (the full box is always written).
// Destination: a CTA-local shared address (valid in the shared::cluster window of this CTA).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// ---------------------------------------------------------------- wgmma
// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4           bits 16-29  leading-dimension byte offset >> 4
//   bits 32-45  stride-dimension byte offset >> 4
//   bits 49-51  base offset: 0, every swizzle pattern we point into starts on a 1024-byte boundary
//               (start addresses are stage base + multiples of 32 (K-major k-steps, inside the first
//               128-byte row, so (addr >> 7) & 7 == 0) or of 1024)
//   bits 62-63  swizzle mode: 1 = 128B
// The 128B swizzle is a function of the absolute smem address: 16-byte chunk bits [4:6] are XORed
// with the 128-byte row bits [7:9]. TMA writes box element (row r, col c) (64 fp16 per row) at
// pre-swizzle offset r * 128 + 2c from a 1024-aligned base, so both sides agree as long as every
// stage base is 1024-aligned.
//
// K-major operand (A always; B in TN), tile = R rows x 64 k, row r at r * 128 bytes:
//   canonical ((8, m), (8, 2k)) : ((128 B, SBO), (16 B, -)), SBO = 1024 (8 rows of 128 B), LBO unused
//   (the 16-wide k slice of one wgmma, 32 bytes, lies inside a 128-byte row; set to 1 by convention).
//   k-step kk (k = 16kk..16kk+15) starts at base + 32 * kk; m atom mt at base + mt * 64 * 128.
// MN-major operand (B in NN), tile = 64 k-rows x BN n, stored as BN/64 boxes of 64 k-rows x 64 n
// (128 B per k-row), box j at base + j * 8192:
//   canonical ((8 n, 8, j), (8 k, 2)) : ((2 B, 16 B, LBO), (128 B, SBO)): LBO = 8192, the stride between
//   64-wide n blocks (boxes); SBO = 1024, the stride between groups of 8 k-rows.
//   k-step kk starts at base + kk * 16 * 128 = base + 2048 * kk (1024-aligned).
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4)
       | (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16)
       | (static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32)
       | (1ull << 62);
}

// wgmma.fence orders this warpgroup's earlier register accesses (epilogue reads of the accumulators,
// previous wgmma) before the wgmma.mma_async that follow; commit_group closes a group; wait_group N
// blocks until at most N groups are pending, after which their smem reads and register writes are done.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Tells the compiler that a register may change here, so that no accumulator access is moved across
// a wgmma issue/wait point (the asm statements alone do not name the accumulators).
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// D(64 x BN, fp32) = (scale_d ? D : 0) + A(64 x 16) * B(16 x BN). imm-scale-a/b = 1 (no negation),
// imm-trans-a = 0 (A K-major), imm-trans-b = TRANS_B (0: B K-major (TN), 1: B N-major (NN)).
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
}


// Tile id -> (batch entry, first row, first column). Within a batch entry, groups of GROUP_M tile
// rows are walked column by column, so concurrently running CTAs share A rows and B columns in L2.
struct TileCoord { int b, m0, n0; };
__device__ __forceinline__ TileCoord tile_coord(int tile, int tiles_m, int tiles_n) {
  const int per_batch = tiles_m * tiles_n;
  const int b = tile / per_batch;
  const int t = tile - b * per_batch;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (t / per_group) * GROUP_M;
  const int group_rows = min(tiles_m - first_m, GROUP_M);
  const int tm = first_m + (t % per_group) % group_rows;
  const int tn = (t % per_group) / group_rows;
  return {b, tm * BM, tn * BN};
}

}  // namespace

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
wgmma_128x64x64_c1_s6_g8(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
      int M, int N, int K, int batch, void* workspace,
      const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES];    // TMA -> consumers: stage filled
  __shared__ __align__(8) uint64_t empty_bar[STAGES];   // consumers -> producer: stage free

  // Round the ring base up to 1024 bytes (the spec asks for 1024 bytes of slack), so every stage,
  // A/B sub-tile and B box starts on a 128B-swizzle pattern boundary (descriptor base offset 0).
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int total_tiles = tiles_m * tiles_n * batch;
  const int ktiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;          // warpgroup index, uniform per warp

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full_bar[s]), 1);                  // the producer's arrive.expect_tx
      mbar_init(smem_u32(&empty_bar[s]), CONSUMERS * 4);     // lane 0 of every consumer warp
    }
    // Make the initialised barriers visible to the async proxy (TMA complete_tx) as well.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();   // the last CTA-wide barrier: from here the warpgroups run independently

  if (wg == 0) {
    // ------------------------------------------------------------ producer warpgroup
#if CONSUMERS > 1
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
#endif
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_b)) : "memory");
      int stage = 0;
      uint32_t phase = 0;     // parity of the current round through the ring
      for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
        const TileCoord tc = tile_coord(tile, tiles_m, tiles_n);
        // B boxes holding at least one column < N. Boxes wholly past N are skipped (and not counted
        // in expect_tx): their smem keeps stale data that only reaches accumulator columns >= N,
        // which the epilogue never stores. A boxes always hold >= 1 valid row (m0 < M).
        const int nbox = min(B_BOXES, (N - tc.n0 + 63) / 64);
        const uint32_t bytes = A_BYTES + nbox * BOX_BYTES;
        for (int kt = 0; kt < ktiles; ++kt) {
          // Wait until the consumers released this stage's previous use (round r - 1); the first
          // round waits on parity 1, which a fresh barrier reports as complete.
          mbar_wait(smem_u32(&empty_bar[stage]), phase ^ 1u);
          const uint32_t fb = smem_u32(&full_bar[stage]);
          mbar_arrive_expect_tx(fb, bytes);
          const uint32_t sa = ring + stage * STAGE_BYTES, sb = sa + A_BYTES;
          tma_load_3d(sa, &tmap_a, fb, kt * BK, tc.m0, tc.b);              // A rows m0.., k cols
          for (int j = 0; j < nbox; ++j) {
#ifdef HGEMM_LAYOUT_TN
            tma_load_3d(sb + j * BOX_BYTES, &tmap_b, fb, kt * BK, tc.n0 + 64 * j, tc.b);  // rows n, cols k
#else
            tma_load_3d(sb + j * BOX_BYTES, &tmap_b, fb, tc.n0 + 64 * j, kt * BK, tc.b);  // rows k, cols n
#endif
          }
          if (++stage == STAGES) { stage = 0; phase ^= 1u; }
        }
      }
      // Drain: wait until the consumers have released every stage, so no TMA write or barrier
      // update is outstanding when this thread leaves.
      for (int i = 0; i < STAGES; ++i) {
        mbar_wait(smem_u32(&empty_bar[stage]), phase ^ 1u);
        if (++stage == STAGES) { stage = 0; phase ^= 1u; }
      }
    }
  } else {
    // ------------------------------------------------------------ consumer warpgroups
#if CONSUMERS > 1
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
#endif
    const int cw = wg - 1;                       // this consumer's row slab: WM rows at cw * WM
    const int warp = (threadIdx.x / 32) % 4;     // warp within the warpgroup: rows 16*warp..+15
    const int lane = threadIdx.x % 32;
    const bool lane0 = lane == 0;
    float acc[MT][BN / 2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[mt][i] = 0.f;

    int stage = 0;
    uint32_t phase = 0;
    const bool pair = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 4 == 0);
    for (int tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
      const TileCoord tc = tile_coord(tile, tiles_m, tiles_n);
      int prev_stage = 0;
      for (int kt = 0; kt < ktiles; ++kt) {
        mbar_wait(smem_u32(&full_bar[stage]), phase);   // TMA bytes of this stage have landed
        const uint32_t sa = ring + stage * STAGE_BYTES + cw * WM * 128;
        const uint32_t sb = ring + stage * STAGE_BYTES + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) fence_reg(acc[mt][i]);
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
#ifdef HGEMM_LAYOUT_TN
          const uint64_t db = make_desc(sb + kk * 32, 16, 1024);
#else
          const uint64_t db = make_desc(sb + kk * 2048, BOX_BYTES, 1024);
#endif
          // The first k16 step of a tile overwrites the accumulators (scale-d = 0).
          const int scale_d = (kt > 0 || kk > 0) ? 1 : 0;
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            wgmma_tile(acc[mt], make_desc(sa + mt * 64 * 128 + kk * 32, 16, 1024), db, scale_d);
        }
        wgmma_commit();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) fence_reg(acc[mt][i]);
        // Keep this k tile's group in flight; the previous group has retired, so its stage's smem
        // is no longer read: hand it back to the producer (one arrival per consumer warp).
        wgmma_wait<1>();
        if (kt > 0 && lane0) mbar_arrive(smem_u32(&empty_bar[prev_stage]));
        prev_stage = stage;
        if (++stage == STAGES) { stage = 0; phase ^= 1u; }
      }
      wgmma_wait<0>();
      if (lane0) mbar_arrive(smem_u32(&empty_bar[prev_stage]));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) fence_reg(acc[mt][i]);

      // Epilogue. wgmma m64nN accumulator layout: warp w of the warpgroup holds rows 16w..16w+15;
      // register 4j + 2h + e of lane l is row 16w + l/4 + 8h, column 8j + 2(l%4) + e (j < N/8).
      __half* Cb = C + static_cast<long long>(tc.b) * M * N;
      const int row_base = tc.m0 + cw * WM + warp * 16 + (lane >> 2);
      const int col_base = tc.n0 + (lane & 3) * 2;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row_base + mt * 64 + h * 8;
          if (r >= M) continue;
          __half* crow = Cb + static_cast<long long>(r) * N;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = col_base + j * 8;
            const float v0 = acc[mt][4 * j + 2 * h], v1 = acc[mt][4 * j + 2 * h + 1];
            if (pair) {
              // N even and c even: c < N implies c + 1 < N.
              if (c < N) *reinterpret_cast<__half2*>(crow + c) = __floats2half2_rn(v0, v1);
            } else {
              if (c < N) crow[c] = __float2half_rn(v0);
              if (c + 1 < N) crow[c + 1] = __float2half_rn(v1);
            }
          }
        }
    }
  }
}

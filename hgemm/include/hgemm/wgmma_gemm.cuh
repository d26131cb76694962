// The wgmma HGEMM family (sm_90a) as one template: TMA + mbarrier stage ring, warp specialisation,
// wgmma.mma_async from 128B-swizzled shared memory, persistent grouped tile scheduling.
//
// One persistent CTA per SM (grid = min(num_sms, tiles)) walks output tiles of BM x BN with a grouped
// rasterisation (GROUP_M tile rows column by column, over the batch as the slowest index). The CTA is
// split by warpgroup (128 threads, 4 consecutive warps):
//
//   * warpgroup 0, the producer: one elected thread issues TMA tile loads (cp.async.bulk.tensor.3d)
//     for A (BM x 64) and B (64 x BN, as BN / 64 boxes of 64 x 64) into a STAGES-deep ring of
//     128B-swizzled shared-memory stages, each completing on that stage's `full` mbarrier;
//   * warpgroups 1..CONSUMERS: each owns WM = BM / CONSUMERS rows of the tile (1 or 2 m64 atoms) and
//     all BN columns, issues wgmma m64nBNk16 from shared memory, keeps one wgmma group in flight, and
//     releases a stage on its `empty` mbarrier once the group that read it has retired.
//
// Options (template parameters):
//   CLUSTER   1, or 2: clusters of two CTAs on adjacent tiles; TMA multicasts the operand tile they
//             share into both (cluster.cuh). The entry needs __cluster_dims__(2, 1, 1) and a grid of
//             whole clusters.
//   MULTICAST with clusters, the shared operand: Multicast::b, vertically adjacent tiles sharing their B
//             tile (each CTA loads every other B box for both); Multicast::a, horizontally adjacent
//             ones sharing their A tile (each CTA loads BM / CLUSTER of its rows for all, its tensor
//             map's box that many rows, and its own B), which cuts more of the L2-to-SM bytes where
//             BM > BN.
//   EPILOGUE  Epilogue::smem: finished tiles are parked in shared memory and stored by warps 1-3 of
//             the producer warpgroup while the consumers start the next tile; Epilogue::registers:
//             stored straight from the accumulators (epilogue.cuh); Epilogue::last_parked: from
//             registers, but a CTA's last tile, after which no load refills the ring, is parked in the
//             ring itself and stored by those warps. It needs no buffer of its own, so the ring keeps
//             that room for another stage: on a grid of one tile a CTA (every tile a last one) each
//             tile goes out as Epilogue::smem stores it, behind a deeper ring. No clusters, split-K or
//             stream-K. Epilogue::bulk: each consumer warp parks its own rows of a finished tile and
//             copies them to C with cp.async.bulk (epilogue.cuh's bulk_store_rows), then starts the next
//             tile: no hand-over to storer warps and no global stores for C from the SM's threads. Where C's rows
//             are not 16-byte aligned (N % 8 != 0) it stores from registers. No split-K or stream-K.
//             Epilogue::bulk_tensor: the same, the rows parked as swizzled 16 x 64 boxes and stored with one
//             TMA tensor store a box through a C tensor map (tma_store_rows; the spec's `tensor_map: C,
//             box=(16, 64), swizzle=128`, which needs C's rows 16-byte aligned).
//   LOADER    Loader::tma: TMA from the operands (16-byte row pitches); Loader::staged_ab / staged_a /
//             staged_b: the grid first copies both, A only or B only into row-padded copies in the
//             workspace, and TMA reads those (staged_loader.cuh; the spec's `staged=1` maps).
//   SPLITK    1, or 2 / 4 / 8: clusters of SPLITK CTAs on one tile, each over a share of the k tiles,
//             reducing their accumulators through distributed shared memory (cluster_splitk.cuh);
//             for problems with too few tiles to fill the GPU and a long K. The entry needs
//             __cluster_dims__(SPLITK, 1, 1) and a grid of whole clusters; the register epilogue
//             (each CTA stores its share of the tile) and no multicast (CLUSTER 1).
//   STREAMK   0, or the most CTAs one tile is split over: the tiles past the last whole wave are
//             split by k in equal shares over the CTAs the last round would leave idle, each finished
//             by the CTA of its first share from its peers' partial sums in the workspace
//             (streamk.cuh); for problems whose tiles leave most of the last round idle, and those
//             with fewer tiles than SMs. The grid is num_sms CTAs, no cluster; tiles that are split
//             are stored from registers. With a staged loader the slots follow the copies and the
//             barrier's counters in the workspace.
//   CTAS_PER_SM  1, or 2: the entry's __launch_bounds__(256, 2) and a grid of min(2 * num_sms, tiles)
//             put two CTAs of one consumer on each SM, one's fill, hand-over and epilogue under the
//             other's mainloop; where the accumulators take more than half a thread's 128 registers
//             the producer hands its registers to the consumer (warpgroup.cuh).
//   TN        the B layout (defaults to the one the harness compiles for: -DHGEMM_LAYOUT_TN).
//
// With two consumer warpgroups, or two CTAs an SM of 128 x 128 tiles, the producer gives registers back
// and the consumers take them (warpgroup.cuh). M, N and K need not be multiples of the tile: TMA
// zero-fills out-of-range rows and columns of a box (so partial K tiles contribute 0), and the epilogues
// predicate C stores.
//
// The launch spec of an instantiation: block = WgmmaShape<...>::kThreads, smem = ::kSmemBytes, grid
// min(num_sms, tiles) (clusters: whole clusters; staged: num_sms, every CTA copies; staged with
// split-K: whole clusters, no more than the GPU holds at once, since the copies end at a grid
// barrier), one tensor map per operand: A box=(BM, 64) (sharing A: BM / CLUSTER rows), B box=(64, 64),
// swizzle=128.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cluster.cuh"
#include "cluster_splitk.cuh"
#include "epilogue.cuh"
#include "scheduler.cuh"
#include "staged_loader.cuh"
#include "streamk.cuh"
#include "tma.cuh"
#include "warpgroup.cuh"
#include "wgmma.cuh"

namespace hgemm {
namespace sm90 {

enum class Epilogue { registers, smem, last_parked, bulk, bulk_tensor };
enum class Loader { tma, staged_ab, staged_a, staged_b };
enum class Multicast { b, a };

// The HGEMM ABI's arguments, the tensor maps by address (they are __grid_constant__ kernel parameters).
struct WgmmaArgs {
  const __half* A;
  const __half* B;
  __half* C;
  int M, N, K, batch;
  void* workspace;
  const CUtensorMap* tmap_a;
  const CUtensorMap* tmap_b;
  const CUtensorMap* tmap_c;   // Epilogue::bulk_tensor's; null for the others
};

// The compile-time shape of one instantiation: what the kernel and its launch spec must agree on.
template <int BM, int BN, int CONSUMERS, int STAGES, Epilogue EPILOGUE, int SPLITK = 1>
struct WgmmaShape {
  static constexpr int kThreads = 128 * (CONSUMERS + 1);
  static constexpr int WM = BM / CONSUMERS;        // rows of the tile owned by one consumer warpgroup
  static constexpr int MT = WM / 64;               // m64 wgmma atoms per consumer warpgroup
  static constexpr int A_BYTES = BM * kBK * 2;     // A stage: BM rows x 128 bytes (one TMA box)
  static constexpr int B_BOXES = BN / 64;          // B stage: BN / 64 boxes of 64 x 64 fp16
  static constexpr int STAGE_BYTES = A_BYTES + B_BOXES * kBoxBytes;
  static constexpr int kParkedBytes =
      EPILOGUE == Epilogue::smem || EPILOGUE == Epilogue::bulk || EPILOGUE == Epilogue::bulk_tensor
          ? ParkedTile<BM, BN>::kBytes : 0;
  using SplitK = ClusterSplitK<MT, BN, SPLITK, 128 * CONSUMERS>;
  // + 1024: the kernel rounds the dynamic smem base up to the 1024-byte swizzle-pattern boundary
  static constexpr int kSmemBytes = STAGES * STAGE_BYTES + kParkedBytes + SplitK::kBytes + 1024;
  static_assert(A_BYTES % 1024 == 0 && STAGE_BYTES % 1024 == 0, "stages must keep 1024-byte alignment");
  static_assert(MT >= 1 && MT * 64 == WM && BN % 64 == 0 && BN <= 256, "tile shape");
  static_assert(MT * BN / 2 <= 128, "accumulators per thread");
};

template <int BM, int BN, int CONSUMERS, int STAGES, int GROUP_M = 8, int CLUSTER = 1,
          Epilogue EPILOGUE = Epilogue::smem, Loader LOADER = Loader::tma, int SPLITK = 1, int STREAMK = 0,
          int CTAS_PER_SM = 1, Multicast MULTICAST = Multicast::b, bool TN = kLayoutTN>
__device__ __forceinline__ void wgmma_gemm(const WgmmaArgs& args) {
  using S = WgmmaShape<BM, BN, CONSUMERS, STAGES, EPILOGUE, SPLITK>;
  using SplitK = typename S::SplitK;
  constexpr int BK = kBK, MT = S::MT, WM = S::WM, A_BYTES = S::A_BYTES, STAGE_BYTES = S::STAGE_BYTES;
  constexpr bool kParked = EPILOGUE == Epilogue::smem;
  constexpr bool kLastParked = EPILOGUE == Epilogue::last_parked;
  constexpr bool kBulk = EPILOGUE == Epilogue::bulk;
  constexpr bool kBulkTensor = EPILOGUE == Epilogue::bulk_tensor;
  constexpr bool kStorers = kParked || kLastParked;   // the producer warpgroup's warps 1-3 store parked tiles
  // the named barrier of every consumer thread before the last tile is parked (0 is __syncthreads'; stream-K,
  // which never parks in the ring, takes 1 + its warpgroup)
  constexpr int kLastParkedBarrier = 3;
  static_assert(!kLastParked || (CLUSTER == 1 && SPLITK == 1 && STREAMK == 0),
                "the last tile parked in the ring: no clusters (a peer may still fill it), split-K or stream-K");
  static_assert(!kLastParked || STAGES * STAGE_BYTES >= ParkedTile<BM, BN>::kBytes, "the ring holds the parked tile");
  static_assert(!(kBulk || kBulkTensor) || (SPLITK == 1 && STREAMK == 0),
                "the bulk-copy epilogues: whole tiles, no split-K or stream-K");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 CTAs");
  static_assert(SPLITK == 1 || (CLUSTER == 1 && !kParked), "cluster split-K: no multicast, the register epilogue");
  static_assert(STREAMK == 0 || (CLUSTER == 1 && SPLITK == 1), "stream-K: no cluster");
  constexpr bool kClustered = CLUSTER > 1 || SPLITK > 1;
  constexpr bool kShareA = CLUSTER > 1 && MULTICAST == Multicast::a;
  const int M = args.M, N = args.N, K = args.K;
  __half* const C = args.C;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES];    // producer -> consumers: stage filled
  __shared__ __align__(8) uint64_t empty_bar[STAGES];   // consumers -> producer: stage free
  __shared__ __align__(8) uint64_t c_full, c_empty;      // the parked tile: consumers <-> storer warps
  __shared__ __align__(8) uint64_t red_full, red_empty;  // split-K: the peers' partials in / ours read

  // Round the ring base up to 1024 bytes (the spec asks for 1024 bytes of slack), so every stage,
  // A/B sub-tile and B box starts on a 128B-swizzle pattern boundary (descriptor base offset 0).
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t cbuf = ring + STAGES * STAGE_BYTES;   // the parked tile: BM rows after the ring
  const uint32_t red = cbuf + S::kParkedBytes;           // split-K: the peers' partials
  const uint32_t rank = kClustered ? cluster_rank() : 0;
  // with split-K the SPLITK CTAs of a cluster share one tile id
  const GroupedTiles<BM, BN, GROUP_M, CLUSTER, kShareA> tiles(M, N, args.batch, CLUSTER > 1 ? static_cast<int>(rank) : 0,
                                                              CLUSTER * SPLITK);
  int kt0 = 0, nk = (K + BK - 1) / BK;                  // this CTA's k tiles: all, or its split-K share
  if constexpr (SPLITK > 1) k_share(nk, static_cast<int>(rank), SPLITK, kt0, nk);
  const int wg = warpgroup_index();
  if constexpr (LOADER != Loader::tma)
    stage_operands<LOADER != Loader::staged_b, LOADER != Loader::staged_a, TN>(args.A, args.B, M, N, K, args.batch,
                                                                                args.workspace);

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full_bar[s]), 1);                          // the producer's arrive.expect_tx
      mbar_init(smem_u32(&empty_bar[s]), CONSUMERS * 4 * CLUSTER);  // lane 0 of every consumer warp
    }
    if constexpr (kStorers) {
      mbar_init(smem_u32(&c_full), CONSUMERS * 4);   // lane 0 of every consumer warp
      mbar_init(smem_u32(&c_empty), ParkedTile<BM, BN>::kStorerThreads / 32);
    }
    if constexpr (SPLITK > 1) {
      mbar_init(smem_u32(&red_full), SplitK::kArrivals);
      mbar_init(smem_u32(&red_empty), SplitK::kArrivals);
    }
    mbar_fence_init();
  }
  __syncthreads();   // the last CTA-wide barrier: from here the warpgroups run independently
  if constexpr (kClustered) cluster_sync();   // the peers' barriers are initialised before any multicast or remote arrive

  if (wg == 0) {
    // ------------------------------------------------------------ producer warpgroup
    producer_registers<CONSUMERS, CTAS_PER_SM, MT * BN / 2>();
    // the storer warps' 16-byte stores: C's rows all 16-byte aligned
    const bool vec_ok = N % 8 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0;
    if (threadIdx.x == 0) {
      tma_prefetch(args.tmap_a);
      tma_prefetch(args.tmap_b);
      if constexpr (kBulkTensor) tma_prefetch(args.tmap_c);
      RingPos<STAGES> pos;
      // `count` k tiles of tile tc from k tile `first` into the ring
      auto load = [&](const TileCoord& tc, int first, int count) {
        // B boxes holding at least one column < N. Boxes wholly past N are skipped (and not counted
        // in expect_tx): their smem keeps stale data that only reaches accumulator columns >= N,
        // which the epilogue never stores. A boxes always hold >= 1 valid row (m0 < M).
        // With clusters, the last group's peer may lie wholly past M (sharing B) or past N (sharing
        // A): it loads none of its own operand (its consumers compute on stale smem and store nothing)
        // but still receives, and multicasts, the shared one.
        const int nbox = max(0, min(S::B_BOXES, (N - tc.n0 + 63) / 64));
        const bool has_a = tc.m0 < M;
        // Sharing A, rank r's rows m0 + r * kARows..: a share wholly past M is not loaded (nor counted),
        // and its rows of the tile, which the epilogue never stores, compute on stale smem.
        constexpr int kARows = BM / CLUSTER;
        const int a_shares = kShareA ? min(CLUSTER, max(0, (M - tc.m0 + kARows - 1) / kARows)) : (has_a ? 1 : 0);
        const uint32_t bytes = a_shares * (kShareA ? kARows * 128 : A_BYTES) + nbox * kBoxBytes;
        for (int kt = first; kt < first + count; ++kt) {
          // Wait until the consumers released this stage's previous use (round r - 1); the first
          // round waits on parity 1, which a fresh barrier reports as complete.
          mbar_wait(smem_u32(&empty_bar[pos.stage]), pos.phase ^ 1u);
          const uint32_t fb = smem_u32(&full_bar[pos.stage]);
          mbar_arrive_expect_tx(fb, bytes);
          const uint32_t sa = ring + pos.stage * STAGE_BYTES, sb = sa + A_BYTES;
          if constexpr (kShareA) {   // A rows m0.., k cols: rank r's BM / CLUSTER rows into every CTA
            if (static_cast<int>(tiles.rank) < a_shares)
              tma_load_3d_multicast(sa + tiles.rank * kARows * 128, args.tmap_a, fb, kt * BK,
                                    tc.m0 + static_cast<int>(tiles.rank) * kARows, tc.b, (1u << CLUSTER) - 1);
          } else if (has_a) {
            tma_load_3d(sa, args.tmap_a, fb, kt * BK, tc.m0, tc.b);
          }
          for (int j = 0; j < nbox; ++j) {
            // TN: B rows n, cols k; NN: rows k, cols n
            const int bc0 = TN ? kt * BK : tc.n0 + 64 * j, bc1 = TN ? tc.n0 + 64 * j : kt * BK;
            if constexpr (CLUSTER > 1 && !kShareA) {
              // box j comes from the CTA of rank j % CLUSTER, into every CTA of the cluster
              if (j % CLUSTER == tiles.rank)
                tma_load_3d_multicast(sb + j * kBoxBytes, args.tmap_b, fb, bc0, bc1, tc.b, (1u << CLUSTER) - 1);
            } else {
              tma_load_3d(sb + j * kBoxBytes, args.tmap_b, fb, bc0, bc1, tc.b);
            }
          }
          pos.advance();
        }
      };
      if constexpr (STREAMK > 0) {
        const StreamKTiles<STREAMK> sk(tiles.total, nk, blockIdx.x, gridDim.x);   // this CTA's work (streamk.cuh)
        StreamKCursor cur = sk.start();
        for (StreamKItem item; sk.next(cur, item);) load(tiles.coord(item.tile), item.kb, item.ke - item.kb);
      } else {
        for (int tile = tiles.first; tile < tiles.total; tile += tiles.step) load(tiles.coord(tile), kt0, nk);
      }
      // Drain: wait until the consumers have released every stage, so no TMA write or barrier
      // update is outstanding when this thread leaves.
      for (int i = 0; i < STAGES; ++i) {
        mbar_wait(smem_u32(&empty_bar[pos.stage]), pos.phase ^ 1u);
        pos.advance();
      }
    } else if (kLastParked && threadIdx.x >= 32) {   // the storer warps: the CTA's last tile, from the ring
      if (tiles.first < tiles.total) {
        const TileCoord tc = tiles.coord(tiles.first + (tiles.total - 1 - tiles.first) / tiles.step * tiles.step);
        mbar_wait(smem_u32(&c_full), 0);
        store_parked<BM, BN>(ring, C + static_cast<long long>(tc.b) * M * N, tc.m0, tc.n0, M, N, vec_ok,
                             threadIdx.x - 32);
      }
    } else if (kParked && threadIdx.x >= 32) {   // the storer warps: every tile the consumers park, in their order
      const int t = threadIdx.x - 32;
      uint32_t c_phase = 0;
      int first = tiles.first, step = tiles.step;
      if constexpr (STREAMK > 0) {   // only the whole tiles past the split ones are parked
        first = StreamKTiles<STREAMK>(tiles.total, nk, blockIdx.x, gridDim.x).split_tiles + blockIdx.x;
        step = gridDim.x;
      }
      for (int tile = first; tile < tiles.total; tile += step) {
        const TileCoord tc = tiles.coord(tile);
        mbar_wait(smem_u32(&c_full), c_phase);
        store_parked<BM, BN>(cbuf, C + static_cast<long long>(tc.b) * M * N, tc.m0, tc.n0, M, N, vec_ok, t);
        __syncwarp();   // the warp's smem reads are done before it hands the buffer back
        if (t % 32 == 0) mbar_arrive(smem_u32(&c_empty));
        c_phase ^= 1u;
      }
    }
  } else {
    // ------------------------------------------------------------ consumer warpgroups
    consumer_registers<CONSUMERS, CTAS_PER_SM, MT * BN / 2>();
    const int cw = wg - 1;                       // this consumer's row slab: WM rows at cw * WM
    const int warp = warpgroup_warp();           // warp within the warpgroup: rows 16*warp..+15
    const int lane = lane_index();
    const bool lane0 = lane == 0;
    float acc[MT][BN / 2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[mt][i] = 0.f;

    RingPos<STAGES> pos;
    uint32_t c_phase = 0, red_phase = 0;
    // `count` k tiles of one tile through the ring into acc
    auto mainloop = [&](int count) {
      int prev_stage = 0;
      for (int kt = 0; kt < count; ++kt) {
        mbar_wait(smem_u32(&full_bar[pos.stage]), pos.phase);   // TMA bytes of this stage have landed
        const uint32_t sa = ring + pos.stage * STAGE_BYTES + cw * WM * 128;
        const uint32_t sb = ring + pos.stage * STAGE_BYTES + A_BYTES;
        wgmma_k64<MT, BN, TN>(acc, sa, sb, kt > 0);
        // Keep this k tile's group in flight; the previous group has retired, so its stage's smem
        // is no longer read: hand it back to the producer (one arrival per consumer warp).
        wgmma_wait<1>();
        if (kt > 0 && lane0) release_stage<CLUSTER>(smem_u32(&empty_bar[prev_stage]));
        prev_stage = pos.stage;
        pos.advance();
      }
      wgmma_wait<0>();
      if (count > 0 && lane0) release_stage<CLUSTER>(smem_u32(&empty_bar[prev_stage]));
    };
    // a finished tile to C: parked for the storer warps, or from registers; `last`: the CTA's last tile
    auto epilogue = [&](const TileCoord& tc, bool last) {
      if (kLastParked && last) {
        // Every consumer warpgroup's wgmma reads of the ring are done (each has waited on its last
        // group) before any of them parks over it; the producer loads nothing after this tile.
        named_barrier_sync(kLastParkedBarrier, 128 * CONSUMERS);
        park_acc<MT, BN>(acc, ring, cw * WM + warp * 16 + (lane >> 2), lane);
        __syncwarp();
        if (lane0) mbar_arrive(smem_u32(&c_full));
      } else if constexpr (kParked) {
        // Park the tile once the storers are done with the previous one.
        mbar_wait(smem_u32(&c_empty), c_phase ^ 1u);
        park_acc<MT, BN>(acc, cbuf, cw * WM + warp * 16 + (lane >> 2), lane);
        __syncwarp();
        if (lane0) mbar_arrive(smem_u32(&c_full));
        c_phase ^= 1u;
      } else if (kBulk && N % 8 == 0 && reinterpret_cast<uintptr_t>(C) % 16 == 0) {   // rows 16-byte aligned
        bulk_store_rows<MT, BN>(acc, cbuf, C, tc, cw * WM + warp * 16, M, N, lane);
      } else if constexpr (kBulkTensor) {   // the C tensor map exists only for 16-byte aligned rows
        tma_store_rows<MT, BN>(acc, cbuf, args.tmap_c, tc, cw * WM + warp * 16, M, N, lane);
      } else {
        const bool rows_aligned = N % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;   // the same for all
        if constexpr (SPLITK > 1) SplitK::store(acc, C, tc, cw * WM, M, N, warp, lane, rank);
        else store_acc<MT, BN>(acc, C, tc, cw * WM, M, N, rows_aligned, warp, lane);
      }
    };
    if constexpr (STREAMK > 0) {
      const StreamKTiles<STREAMK> sk(tiles.total, nk, blockIdx.x, gridDim.x);   // this CTA's work (streamk.cuh)
      // the slots and flags, after the staged copies and their barrier's counters where there are some;
      // made where a segment ends rather than held in registers through the mainloop
      auto workspace = [&]() {
        char* base = static_cast<char*>(args.workspace);
        if constexpr (LOADER != Loader::tma)
          base += staged_workspace_end<LOADER != Loader::staged_b, LOADER != Loader::staged_a, TN>(M, N, K, args.batch);
        return StreamKWorkspace<BM, BN, CONSUMERS>(base, cw);
      };
      const int t = threadIdx.x % 128, bar = 1 + cw;   // a named barrier a consumer warpgroup
      const bool rows_aligned = N % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;
      StreamKCursor cur = sk.start();
      for (StreamKItem item; sk.next(cur, item);) {
        const TileCoord tc = tiles.coord(item.tile);
        mainloop(item.ke - item.kb);
        fence_acc(acc);
        if (item.tile >= sk.split_tiles) {    // a whole tile, one of this CTA's own
          epilogue(tc, false);
        } else if (item.kb > 0) {             // a contributor: its partial sums to its slot
          streamk_publish<MT, BN>(acc, workspace(), t, bar);
        } else {                              // the owner: its contributors' sums added, then stored
          if (item.ke < sk.nk)
            streamk_gather<MT, BN>(acc, workspace(), static_cast<int>(blockIdx.x) + 1, sk.last_cta(item.tile), t, bar);
          store_acc<MT, BN>(acc, C, tc, cw * WM, M, N, rows_aligned, warp, lane);
        }
      }
    } else {
      for (int tile = tiles.first; tile < tiles.total; tile += tiles.step) {
        const TileCoord tc = tiles.coord(tile);
        mainloop(nk);
        if constexpr (SPLITK > 1) {
          if (nk == 0) {   // an empty k share (K < SPLITK k tiles) adds zeros, not the last tile's sums
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int i = 0; i < BN / 2; ++i) acc[mt][i] = 0.f;
          }
        }
        fence_acc(acc);
        if constexpr (SPLITK > 1) {
          SplitK::reduce(acc, red, smem_u32(&red_full), smem_u32(&red_empty), rank, threadIdx.x - 128, red_phase);
          red_phase ^= 1u;
        }
        epilogue(tc, tile + tiles.step >= tiles.total);
      }
      if constexpr (kBulk || kBulkTensor) bulk_wait_read<0>();   // the last copies have read the buffer before it is freed
    }
  }
  if constexpr (kClustered) cluster_sync();   // no CTA leaves while a peer may still arrive on its barriers
}

}  // namespace sm90
}  // namespace hgemm

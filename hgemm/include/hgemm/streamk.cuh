// Stream-K over the last partial wave (sm_90a): a persistent grid of G CTAs whose output tiles do not
// divide into whole waves splits the remainder's tiles by k over the CTAs the last round would leave
// idle. 2455 x 3840 x 7680 in 128 x 192 tiles is 400 tiles on 132 SMs: four rounds, the last holding 4
// tiles; split 8 ways, that round takes an eighth of a tile's k tiles. A problem with fewer tiles than
// CTAs is all remainder: 16 tiles of 128 x 512 x 7616 in 64 x 64 run on 128 CTAs rather than 16.
//
// The split is aligned: the remainder's S tiles each go to `ways` = min(MAX_WAYS, G / S, k tiles /
// MIN_UNITS) CTAs in equal k shares, CTA c taking share c % ways of split tile c / ways, and with fewer
// than two ways nothing is split. Sharing the remainder's k tiles out evenly over all G CTAs instead
// (each CTA's share running across tile boundaries) leaves no CTA idle, but puts every CTA at its own
// k offset: CTAs on tiles of one row or column of the grid then read their A and B k tiles at different
// times, and L2 stops serving one CTA's reads from another's. On an H100 that split read 2.7x the DRAM
// bytes of the whole-tile kernel at 4096 x 4096 x 14336 (116 remainder tiles on 132 SMs) and took 1.5x
// its time (benchmarks/streamk/README.md). With the aligned split, share j of every tile is read at the
// same time, as the whole-tile kernel reads its tiles.
//
// The work of one CTA, in order:
//   1. its share of a split tile (CTAs 0 .. S x ways - 1): k tiles [kb, ke) of it;
//   2. whole tiles S + blockIdx.x, + G, ... (where tiles are split, every CTA as many).
// A split tile is finished by its owner, the CTA of share 0: the others (contributors) write their fp32
// partial sums to a slot of the workspace and raise a flag; the owner waits for the flags, adds the
// slots into its accumulators in CTA order (the result does not depend on which CTA finishes first),
// clears the slots and flags, and stores the tile. Every share is a CTA's first piece of work and the
// shares are equal, so the owner's wait is short. A contributor never waits, and the owner waits only
// on CTAs of higher index, which a GPU launches no later; past ~1 s of waiting (a CTA kept off its SM by
// other work) the owner traps, a crash rather than a hang.
//
// Workspace (the launch spec's `workspace: num_sms * (BM * BN * 4 + 8)`, after the staged copies and
// their counters with a staged loader; `workspace_zero: kept`): G slots of BM x BN floats, then
// G x CONSUMERS flags. A slot holds each consumer warpgroup's rows as
// that warpgroup's threads hold them (float4 j of thread t at j * 128 + t), so the writes and the
// owner's reads are coalesced and need no index arithmetic. The owner leaves every slot and flag it
// read zero, so the workspace is filled once, when allocated.
#pragma once

#include <stdint.h>

#include "scheduler.cuh"

namespace hgemm {
namespace sm90 {

// One piece of a CTA's work: k tiles [kb, ke) of output tile `tile` (a whole tile: kb 0, ke nk).
struct StreamKItem { int tile, kb, ke; };

// Where a CTA is in its list of work.
struct StreamKCursor { int unit, whole; };

// The split of a grid's tiles: which tiles are shared out by k tile, and CTA `cta`'s part of them.
// MAX_WAYS bounds the CTAs one tile is split over (each CTA beyond the first costs the owner a slot's
// read); a tile is split no finer than MIN_UNITS k tiles a CTA. Host and device: the tests run it on
// the host for every CTA of a grid.
template <int MAX_WAYS>
struct StreamKTiles {
  static constexpr int MIN_UNITS = 4;
  int total;        // output tiles (all batch entries)
  int nk;           // k tiles of one output tile
  int cta, ctas;    // this CTA, of a grid of `ctas`
  int split_tiles;  // tiles 0 .. split_tiles - 1 are shared out by k tile
  int ways;         // CTAs a split tile, split_tiles x ways of them: CTAs 0 .. split_ctas - 1
  int split_ctas;
  int begin, end;   // this CTA's units: k tiles of the split tiles laid out tile by tile
                    // (32-bit: units < ctas x nk, below 2^31 for any K below ~1 G on 132 SMs)

  __host__ __device__ __forceinline__ StreamKTiles(int total_tiles, int k_tiles, int cta_index, int grid_ctas)
      : total(total_tiles), nk(k_tiles), cta(cta_index), ctas(grid_ctas) {
    // the tiles past the last whole wave, split where two or more CTAs a tile are idle for them
    const int rest = nk == 0 ? 0 : (total < ctas ? total : total % ctas);
    const int by_k = nk / MIN_UNITS, by_ctas = rest == 0 ? 0 : ctas / rest;
    ways = by_k < by_ctas ? by_k : by_ctas;
    ways = ways < MAX_WAYS ? ways : MAX_WAYS;
    split_tiles = ways >= 2 ? rest : 0;
    ways = ways >= 2 ? ways : 1;
    split_ctas = split_tiles * ways;
    begin = cta < split_ctas ? first_unit(cta) : 0;
    end = cta < split_ctas ? first_unit(cta + 1) : 0;
  }
  // The first unit of CTA c's share: share c % ways of tile c / ways, the shares differing by at most one
  // k tile.
  __host__ __device__ __forceinline__ int first_unit(int c) const {
    return c / ways * nk + c % ways * nk / ways;
  }
  __host__ __device__ __forceinline__ StreamKCursor start() const { return {begin, split_tiles + cta}; }
  // The next piece of work after `cur` into `item`; false when there is none.
  __host__ __device__ __forceinline__ bool next(StreamKCursor& cur, StreamKItem& item) const {
    if (cur.unit < end) {
      const int tile = cur.unit / nk, tile_unit = tile * nk;
      item = {tile, cur.unit - tile_unit, end - tile_unit};
      cur.unit = end;
      return true;
    }
    if (cur.whole < total) {
      item = {cur.whole, 0, nk};
      cur.whole += ctas;
      return true;
    }
    return false;
  }
  // The last CTA with a share of split tile `tile` (its owner's contributors run to it).
  __host__ __device__ __forceinline__ int last_cta(int tile) const { return tile * ways + ways - 1; }
};

// A barrier of `threads` threads (whole warps) under id `id` (1-15: 0 is __syncthreads'), which each
// warp reaches converged. A thread that reads what another CTA published acquires the flag itself
// (streamk_gather): with thread 0 alone spinning on the flags before this barrier, an H100 let the
// owner's other warps read slots before their flag was set (benchmarks/streamk/README.md).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  __syncwarp();
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ unsigned int ld_acquire_gpu(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// The workspace of a grid of G CTAs, as one consumer warpgroup (`cw` of CONSUMERS, WM rows of a BM x BN
// tile) sees it: its rows of every CTA's slot, its flag of every CTA.
template <int BM, int BN, int CONSUMERS>
struct StreamKWorkspace {
  static constexpr int kSlotFloats = BM * BN;
  static constexpr int kPartFloats = BM / CONSUMERS * BN;   // one consumer warpgroup's rows of a slot
  float* slots;
  unsigned int* flags;
  int cw;
  __device__ __forceinline__ StreamKWorkspace(void* workspace, int consumer) : cw(consumer) {
    slots = static_cast<float*>(workspace);
    flags = reinterpret_cast<unsigned int*>(slots + static_cast<long long>(gridDim.x) * kSlotFloats);
  }
  __device__ __forceinline__ float4* part(int cta) const {
    return reinterpret_cast<float4*>(slots + static_cast<long long>(cta) * kSlotFloats + cw * kPartFloats);
  }
  __device__ __forceinline__ unsigned int* flag(int cta) const { return flags + cta * CONSUMERS + cw; }
};

// A contributor's end of a segment: consumer thread t (of 128) writes its accumulators (the m64nBN
// layout of wgmma.cuh, MT atoms) into this CTA's slot; once the whole warpgroup has (named barrier
// `bar`), thread 0 raises the flag, releasing the writes at GPU scope.
template <int MT, int BN, class Workspace>
__device__ __forceinline__ void streamk_publish(const float (&acc)[MT][BN / 2], const Workspace& ws, int t, int bar) {
  float4* dst = ws.part(static_cast<int>(blockIdx.x));
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
      __stcg(dst + (mt * (BN / 8) + j) * 128 + t,
             make_float4(acc[mt][4 * j], acc[mt][4 * j + 1], acc[mt][4 * j + 2], acc[mt][4 * j + 3]));
  __threadfence();
  named_barrier_sync(bar, 128);
  if (t == 0) st_release_gpu(ws.flag(static_cast<int>(blockIdx.x)), 1u);
}

// The owner's end: every thread waits for the flags of CTAs first .. last itself (acquire), adds those
// CTAs' slots into its accumulators, in CTA order, and clears what it read; once the whole warpgroup
// has seen every flag (named barrier `bar`), thread 0 lowers them.
template <int MT, int BN, class Workspace>
__device__ __forceinline__ void streamk_gather(float (&acc)[MT][BN / 2], const Workspace& ws, int first, int last, int t,
                                               int bar) {
  const long long start = clock64();
  for (int c = first; c <= last; ++c) {
    while (ld_acquire_gpu(ws.flag(c)) == 0u) {
      if (clock64() - start > (1LL << 31)) __trap();
      __nanosleep(64);
    }
    float4* src = ws.part(c);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float4* p = src + (mt * (BN / 8) + j) * 128 + t;
        const float4 v = __ldcg(p);
        __stcg(p, make_float4(0.f, 0.f, 0.f, 0.f));
        acc[mt][4 * j] += v.x;
        acc[mt][4 * j + 1] += v.y;
        acc[mt][4 * j + 2] += v.z;
        acc[mt][4 * j + 3] += v.w;
      }
  }
  named_barrier_sync(bar, 128);
  if (t == 0)
    for (int c = first; c <= last; ++c) *ws.flag(c) = 0u;
}

}  // namespace sm90
}  // namespace hgemm

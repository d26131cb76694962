// Persistent Hopper HGEMM from the pieces of hgemm/include: a 128x128x64 tile, a 4-stage TMA ring,
// one producer warpgroup and two consumer warpgroups (64 rows each) with register reallocation,
// grouped tile order, and the accumulators stored straight from registers. Both layouts; TMA needs
// 16-byte row pitches (K % 8 == 0, and N % 8 == 0 for NN); the harness reports other shapes unsupported.
#include <hgemm/scheduler.cuh>
#include <hgemm/tma.cuh>
#include <hgemm/warpgroup.cuh>
#include <hgemm/wgmma.cuh>
#include <hgemm/epilogue.cuh>

/*@launch
entry: hgemm_wgmma_persistent
block: 384
grid: min(num_sms, cdiv(M, 128) * cdiv(N, 128) * batch)
smem: 4 * (128 + 128) * 64 * 2 + 1024
workspace: 0
layouts: NN, TN
tensor_map: A, box=(128, 64), swizzle=128
tensor_map: B, box=(64, 64), swizzle=128
@*/

using namespace hgemm::sm90;

constexpr int BM = 128, BN = 128, STAGES = 4, CONSUMERS = 2;
constexpr int A_BYTES = BM * kBK * 2, STAGE_BYTES = A_BYTES + BN / 64 * kBoxBytes;

extern "C" __global__ void __launch_bounds__(384, 1)
hgemm_wgmma_persistent(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t ring = (smem_u32(smem) + 1023u) & ~1023u;   // 128B swizzle: 1024-byte aligned stages
  const GroupedTiles<BM, BN, 8> tiles(M, N, batch, 0);
  const int ktiles = (K + kBK - 1) / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full[s]), 1);               // the producer's arrive.expect_tx
      mbar_init(smem_u32(&empty[s]), CONSUMERS * 4);  // lane 0 of every consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (warpgroup_index() == 0) {                       // producer: one thread issues the TMA loads
    producer_registers<CONSUMERS>();
    if (threadIdx.x != 0) return;
    RingPos<STAGES> pos;
    for (int tile = tiles.first; tile < tiles.total; tile += tiles.step) {
      const TileCoord tc = tiles.coord(tile);
      const int nbox = min(BN / 64, (N - tc.n0 + 63) / 64);   // B boxes wholly past N are not loaded
      for (int kt = 0; kt < ktiles; ++kt) {
        mbar_wait(smem_u32(&empty[pos.stage]), pos.phase ^ 1u);
        const uint32_t bar = smem_u32(&full[pos.stage]), sa = ring + pos.stage * STAGE_BYTES;
        mbar_arrive_expect_tx(bar, A_BYTES + nbox * kBoxBytes);
        tma_load_3d(sa, &tmap_a, bar, kt * kBK, tc.m0, tc.b);
        for (int j = 0; j < nbox; ++j) {
          if constexpr (kLayoutTN) tma_load_3d(sa + A_BYTES + j * kBoxBytes, &tmap_b, bar, kt * kBK, tc.n0 + 64 * j, tc.b);
          else tma_load_3d(sa + A_BYTES + j * kBoxBytes, &tmap_b, bar, tc.n0 + 64 * j, kt * kBK, tc.b);
        }
        pos.advance();
      }
    }
    for (int i = 0; i < STAGES; ++i) {                // drain: no TMA write outstanding at exit
      mbar_wait(smem_u32(&empty[pos.stage]), pos.phase ^ 1u);
      pos.advance();
    }
    return;
  }

  consumer_registers<CONSUMERS>();                    // consumers: 64 rows of the tile each
  const int cw = warpgroup_index() - 1, warp = warpgroup_warp(), lane = lane_index();
  const bool rows_aligned = N % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;
  float acc[1][BN / 2] = {};
  RingPos<STAGES> pos;
  for (int tile = tiles.first; tile < tiles.total; tile += tiles.step) {
    const TileCoord tc = tiles.coord(tile);
    int prev = 0;
    for (int kt = 0; kt < ktiles; ++kt) {
      mbar_wait(smem_u32(&full[pos.stage]), pos.phase);
      const uint32_t sa = ring + pos.stage * STAGE_BYTES;
      wgmma_k64<1, BN, kLayoutTN>(acc, sa + cw * 64 * 128, sa + A_BYTES, kt > 0);
      wgmma_wait<1>();                                // the previous k tile's group has retired:
      if (kt > 0 && lane == 0) mbar_arrive(smem_u32(&empty[prev]));   // its stage is free
      prev = pos.stage;
      pos.advance();
    }
    wgmma_wait<0>();
    if (ktiles > 0 && lane == 0) mbar_arrive(smem_u32(&empty[prev]));
    fence_acc(acc);
    store_acc<1, BN>(acc, C, tc, cw * 64, M, N, rows_aligned, warp, lane);
  }
}

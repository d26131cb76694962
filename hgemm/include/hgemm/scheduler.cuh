// Persistent grouped tile scheduling: a grid of at most one CTA per SM walks the output tiles of a
// (batched) GEMM, tile ids first, first + step, ..., in a grouped order that keeps concurrently running
// CTAs on shared A rows and B columns in L2.
#pragma once

namespace hgemm {
namespace sm90 {

// One output tile: batch entry, first row, first column.
struct TileCoord { int b, m0, n0; };

// Tile id -> TileCoord. Within a batch entry, groups of GROUP_M tile rows are walked column by column,
// so concurrently running CTAs share A rows and B columns in L2; the batch is the slowest index.
// With clusters a tile id names CLUSTER adjacent tiles, one per CTA of the cluster by its rank, which
// share an operand tile that TMA can multicast to all of them: vertically adjacent ones share their B
// tile (rows counts groups of CLUSTER tile rows), with ALONG_N horizontally adjacent ones their A tile
// (cols counts groups of CLUSTER tile columns).
template <int BM, int BN, int GROUP_M, int CLUSTER = 1, bool ALONG_N = false>
__device__ __forceinline__ TileCoord tile_coord(int tile, int rows, int cols, int rank) {
  const int per_batch = rows * cols;
  const int b = tile / per_batch;
  const int t = tile - b * per_batch;
  const int per_group = GROUP_M * cols;
  const int first_m = (t / per_group) * GROUP_M;
  const int group_rows = min(rows - first_m, GROUP_M);
  const int tm = first_m + (t % per_group) % group_rows;
  const int tn = (t % per_group) / group_rows;
  if constexpr (ALONG_N) return {b, tm * BM, (tn * CLUSTER + rank) * BN};
  return {b, (tm * CLUSTER + rank) * BM, tn * BN};
}

// The tiles of one CTA of a persistent grid (blockIdx.x; gridDim.x CTAs, whole clusters): ids
// first, first + step, ... below total, each a TileCoord by coord().
//   for (int tile = s.first; tile < s.total; tile += s.step) { const TileCoord tc = s.coord(tile); ... }
template <int BM, int BN, int GROUP_M, int CLUSTER = 1, bool ALONG_N = false>
struct GroupedTiles {
  int rows, cols;  // tile rows and columns, CLUSTER at a time along the shared axis (the last group may
                   // stick out past M, or past N)
  int total;       // tile ids of all batch entries
  int first, step;
  int rank;        // this CTA's rank in its cluster (0 without clusters)
  // ctas_per_tile: CTAs that take one tile id together (CLUSTER; more with cluster split-K)
  __device__ __forceinline__ GroupedTiles(int M, int N, int batch, int rank_in_cluster, int ctas_per_tile = CLUSTER) {
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    rows = ALONG_N ? tiles_m : (tiles_m + CLUSTER - 1) / CLUSTER;
    cols = ALONG_N ? (tiles_n + CLUSTER - 1) / CLUSTER : tiles_n;
    total = rows * cols * batch;
    first = blockIdx.x / ctas_per_tile;
    step = gridDim.x / ctas_per_tile;
    rank = rank_in_cluster;
  }
  __device__ __forceinline__ TileCoord coord(int tile) const {
    return tile_coord<BM, BN, GROUP_M, CLUSTER, ALONG_N>(tile, rows, cols, rank);
  }
};

}  // namespace sm90
}  // namespace hgemm

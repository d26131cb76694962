// Inclusive scan along each row: y[r, c] = sum_{k <= c} x[r, k]. One block per row walks the row in
// tiles of THREADS * ITEMS elements: a coalesced load into shared memory, a sequential scan of ITEMS
// contiguous elements per thread, a warp-shuffle scan of the per-thread totals, a scan of the warp
// totals, then a coalesced store. A running carry links the tiles.
#define THREADS 256
#define ITEMS 8
#define TILE (THREADS * ITEMS)
#define PADDED(k) ((k) + ((k) >> 5))  // one pad word per 32 avoids 8-way bank conflicts on k = t * ITEMS + j

/*@launch
entry: cumsum_rows_f32
block: 256
grid: rows
smem: 0
@*/
template <typename T>
__device__ void scan_row(const T* __restrict__ xr, T* __restrict__ yr, int cols) {
  __shared__ T tile[PADDED(TILE)];
  __shared__ T warp_tot[THREADS / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T carry = 0;
  for (int base = 0; base < cols; base += TILE) {
    for (int k = threadIdx.x; k < TILE; k += THREADS) {
      const int c = base + k;
      tile[PADDED(k)] = c < cols ? xr[c] : T(0);
    }
    __syncthreads();
    T local[ITEMS];
    T run = 0;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      run += tile[PADDED(threadIdx.x * ITEMS + j)];
      local[j] = run;
    }
    T incl = run;  // inclusive scan of per-thread totals within the warp
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const T t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    if (lane == 31) warp_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      T w = lane < THREADS / 32 ? warp_tot[lane] : T(0);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const T t = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += t;
      }
      if (lane < THREADS / 32) warp_tot[lane] = w;  // now inclusive over warps
    }
    __syncthreads();
    const T offset = carry + (incl - run) + (warp > 0 ? warp_tot[warp - 1] : T(0));
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) tile[PADDED(threadIdx.x * ITEMS + j)] = local[j] + offset;
    carry += warp_tot[THREADS / 32 - 1];
    __syncthreads();
    for (int k = threadIdx.x; k < TILE; k += THREADS) {
      const int c = base + k;
      if (c < cols) yr[c] = tile[PADDED(k)];
    }
    __syncthreads();  // the next tile overwrites tile[] and warp_tot[]
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) cumsum_rows_f32(const float* __restrict__ x, float* __restrict__ y,
                                                                      int rows, int cols) {
  if ((int)blockIdx.x >= rows) return;
  const long long off = (long long)blockIdx.x * cols;
  scan_row<float>(x + off, y + off, cols);
}

// y[c, r] = x[r, c]. A 32 x 32 tile goes through shared memory so that both the global reads (along
// rows of x) and the global writes (along rows of y) are coalesced; the +1 column of padding keeps
// the column-wise shared-memory reads free of bank conflicts. Edge tiles are guarded.
#define TILE 32
#define ROWS_PER_PASS 8

/*@launch
entry: transpose_f32
block: 32, 8
grid: cdiv(cols, 32), cdiv(rows, 32)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
transpose_f32(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = x[(long long)r * cols + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int c = c0 + k, r = r0 + threadIdx.x;  // y's row c, column r
    if (c < cols && r < rows) y[(long long)c * rows + r] = tile[threadIdx.x][k];
  }
}

// out[c] = sum_r x[r, c]. A block owns 32 adjacent columns; its 32 thread rows walk the matrix rows
// with stride 32 (each warp reads 128 contiguous bytes per step), then the 32 partial sums of each
// column are combined through padded shared memory.
#define TILE_COLS 32
#define ROW_THREADS 32

/*@launch
entry: col_sum_f32
block: 32, 32
grid: cdiv(cols, 32)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(TILE_COLS * ROW_THREADS)
col_sum_f32(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  __shared__ float part[ROW_THREADS][TILE_COLS + 1];
  const int c = blockIdx.x * TILE_COLS + threadIdx.x;
  float acc = 0.f;
  if (c < cols)
    for (long long r = threadIdx.y; r < rows; r += ROW_THREADS) acc += x[r * cols + c];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = 0.f;
    for (int k = 0; k < ROW_THREADS; ++k) s += part[k][threadIdx.x];
    out[c] = s;
  }
}

// y[b, c, r] = x[b, r, c] for each of batch matrices. One 32 x 32 shared-memory tile per block,
// blockIdx.z picks the matrix; reads and writes are both coalesced, edges guarded.
#include <cuda_fp16.h>
#define TILE 32
#define ROWS_PER_PASS 8

/*@launch
entry: batched_transpose_f16
block: 32, 8
grid: cdiv(cols, 32), cdiv(rows, 32), batch
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
batched_transpose_f16(const __half* __restrict__ x, __half* __restrict__ y, int batch, int rows, int cols) {
  __shared__ __half tile[TILE][TILE + 1];
  if ((int)blockIdx.z >= batch) return;
  const long long base = (long long)blockIdx.z * rows * cols;
  const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = x[base + (long long)r * cols + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int c = c0 + k, r = r0 + threadIdx.x;
    if (c < cols && r < rows) y[base + (long long)c * rows + r] = tile[threadIdx.x][k];
  }
}

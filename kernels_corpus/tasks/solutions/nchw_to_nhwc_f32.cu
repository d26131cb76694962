// y[b, p, ch] = x[b, ch, p] with p = h * width + w: per image, a transpose of the (channels,
// height * width) matrix. 32 x 32 shared-memory tiles, blockIdx.z picks the image, edges guarded.
#define TILE 32
#define ROWS_PER_PASS 8

/*@launch
entry: nchw_to_nhwc_f32
block: 32, 8
grid: cdiv(height * width, 32), cdiv(channels, 32), batch
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(TILE * ROWS_PER_PASS)
nchw_to_nhwc_f32(const float* __restrict__ x, float* __restrict__ y, int batch, int channels, int height, int width) {
  __shared__ float tile[TILE][TILE + 1];
  if ((int)blockIdx.z >= batch) return;
  const int pixels = height * width;
  const long long base = (long long)blockIdx.z * channels * pixels;
  const int p0 = blockIdx.x * TILE, ch0 = blockIdx.y * TILE;
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int ch = ch0 + k, p = p0 + threadIdx.x;
    if (ch < channels && p < pixels) tile[k][threadIdx.x] = x[base + (long long)ch * pixels + p];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < TILE; k += ROWS_PER_PASS) {
    const int p = p0 + k, ch = ch0 + threadIdx.x;
    if (p < pixels && ch < channels) y[base + (long long)p * channels + ch] = tile[threadIdx.x][k];
  }
}

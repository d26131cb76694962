// out[r, j] = x[r, idx[r, j]] (torch.gather along dim 1). Grid-stride over the outputs in order, so
// the idx reads and out writes are coalesced; the x reads are data-dependent within row r.
/*@launch
entry: gather_cols_f32
block: 256
grid: min(cdiv(rows * k, 1024), num_sms * 32)
smem: 0
@*/
extern "C" __global__ void __launch_bounds__(256)
gather_cols_f32(const float* __restrict__ x, const long long* __restrict__ idx, float* __restrict__ out, int rows,
                int cols, int k) {
  const long long total = (long long)rows * k;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < total; i += stride) {
    const long long r = i / k;
    out[i] = x[r * cols + idx[i]];
  }
}

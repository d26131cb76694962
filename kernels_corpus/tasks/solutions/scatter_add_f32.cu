// out[b, :] = sum of src[i, :] over all i with idx[i] == b (zero for bins no index hits).
// The output starts as garbage and blocks cannot wait for each other, so the atomics go to a
// module-level accumulator instead: every block adds its rows with atomicAdd, then takes a ticket; the
// last block to finish copies the accumulator to out and zeroes it again for the next launch. Float
// atomics make the summation order (and so the last bits) vary from run to run.
// Outputs larger than the accumulator take a slow but correct fallback: each thread owns an output
// element and scans all of idx.
#define CAPACITY (1 << 18)

/*@launch
entry: scatter_add_f32
block: 512
grid: min(cdiv(n * dim, 4096), num_sms * 8)
smem: 0
@*/
__device__ float g_accum[CAPACITY];  // zero at module load; the last block of each launch re-zeroes it
__device__ unsigned int g_ticket;

extern "C" __global__ void __launch_bounds__(512)
scatter_add_f32(const float* __restrict__ src, const long long* __restrict__ idx, float* __restrict__ out, int n,
                int dim, int bins) {
  __shared__ bool is_last;
  const long long total = (long long)n * dim, out_total = (long long)bins * dim;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if (out_total > CAPACITY) {  // uniform over the grid
    for (long long o = tid; o < out_total; o += stride) {
      const long long b = o / dim;
      const long long d = o - b * dim;
      float s = 0.f;
      for (long long r = 0; r < n; ++r)
        if (idx[r] == b) s += src[r * dim + d];
      out[o] = s;
    }
    return;
  }
  for (long long i = tid; i < total; i += stride) {
    const long long r = i / dim;
    atomicAdd(&g_accum[idx[r] * dim + (i - r * dim)], src[i]);
  }
  __threadfence();  // this thread's atomics are visible device-wide before the block takes its ticket
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&g_ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (long long o = threadIdx.x; o < out_total; o += blockDim.x) {
    out[o] = __ldcg(&g_accum[o]);  // read from L2, where the atomics landed
    g_accum[o] = 0.f;
  }
  if (threadIdx.x == 0) g_ticket = 0;
}

// counts[b] = number of i with values[i] == b, values in [0, bins). Each block counts its grid-stride
// slice in a shared-memory histogram (cheap shared atomics), then adds the non-zero bins to a
// module-level accumulator; the output starts as garbage and blocks cannot wait for each other, so
// the last block to take a ticket copies the accumulator to counts and zeroes it for the next launch.
// Integer atomics make the result exact. More bins than shared memory holds go straight to the
// accumulator; more bins than the accumulator holds take a slow owner-computes fallback.
#define CAPACITY (1 << 16)
#define SMEM_BINS 8192

/*@launch
entry: histogram_i32
block: 512
grid: min(cdiv(n, 4096), num_sms * 4)
smem: 0
@*/
__device__ unsigned int g_counts[CAPACITY];  // zero at module load; the last block re-zeroes it
__device__ unsigned int g_ticket;

extern "C" __global__ void __launch_bounds__(512)
histogram_i32(const int* __restrict__ values, int* __restrict__ counts, int n, int bins) {
  __shared__ unsigned int local[SMEM_BINS];
  __shared__ bool is_last;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  if (bins > CAPACITY) {  // uniform over the grid
    for (long long b = tid; b < bins; b += stride) {
      int c = 0;
      for (long long i = 0; i < n; ++i) c += values[i] == b;
      counts[b] = c;
    }
    return;
  }
  if (bins <= SMEM_BINS) {
    for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (long long i = tid; i < n; i += stride) atomicAdd(&local[values[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
      if (local[b]) atomicAdd(&g_counts[b], local[b]);
  } else {
    for (long long i = tid; i < n; i += stride) atomicAdd(&g_counts[values[i]], 1u);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&g_ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  for (int b = threadIdx.x; b < bins; b += blockDim.x) {
    counts[b] = (int)__ldcg(&g_counts[b]);
    g_counts[b] = 0;
  }
  if (threadIdx.x == 0) g_ticket = 0;
}

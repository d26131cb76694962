// Sum of a float32 vector in one launch. Each block reduces a grid-stride slice and stores its
// partial; the last block to finish (a ticket counter) adds the partials in block order and resets
// the counter for the next launch. No pre-zeroed output is needed, and the result is deterministic
// for a given grid. Blocks are capped at MAX_BLOCKS, the size of the partials array.
#define MAX_BLOCKS 1024

/*@launch
entry: sum_f32
block: 512
grid: min(cdiv(n, 8192), 1024)
smem: 0
@*/
__device__ float g_partials[MAX_BLOCKS];
__device__ unsigned int g_ticket;  // zero at module load; the last block of each launch resets it

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; the result is valid in thread 0.
__device__ float block_sum(float v) {
  __shared__ float warp_part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // a previous call may still be reading warp_part
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = (blockDim.x + 31) >> 5;
    v = warp_sum(lane < nwarps ? warp_part[lane] : 0.f);
  }
  return v;
}

extern "C" __global__ void __launch_bounds__(512) sum_f32(const float* __restrict__ x, float* __restrict__ out,
                                                          int n) {
  __shared__ bool is_last;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  float acc = 0.f;
  long long done = 0;
  if (((unsigned long long)x & 15) == 0) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (long long i = tid; i < n4; i += stride) {
      const float4 v = x4[i];
      acc += (v.x + v.y) + (v.z + v.w);
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) acc += x[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) {
    g_partials[blockIdx.x] = acc;
    __threadfence();  // publish the partial before taking a ticket
    is_last = atomicAdd(&g_ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  float s = 0.f;
  for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) s += __ldcg(&g_partials[b]);  // from L2
  s = block_sum(s);
  if (threadIdx.x == 0) {
    out[0] = s;
    g_ticket = 0;
  }
}

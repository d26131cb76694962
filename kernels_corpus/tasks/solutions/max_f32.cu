// Maximum of a float32 vector in one launch. Each block reduces a grid-stride slice and stores its
// partial; the last block to finish (a ticket counter) takes the max of the partials and resets
// the counter for the next launch. No pre-zeroed output is needed, and max is exact in any
// order. Blocks are capped at MAX_BLOCKS, the size of the partials array.
#include <math_constants.h>
#define MAX_BLOCKS 1024

/*@launch
entry: max_f32
block: 512
grid: min(cdiv(n, 8192), 1024)
smem: 0
@*/
__device__ float g_partials[MAX_BLOCKS];
__device__ unsigned int g_ticket;  // zero at module load; the last block of each launch resets it

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Max over the block; the result is valid in thread 0.
__device__ float block_max(float v) {
  __shared__ float warp_part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();  // a previous call may still be reading warp_part
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = (blockDim.x + 31) >> 5;
    v = warp_max(lane < nwarps ? warp_part[lane] : -CUDART_INF_F);
  }
  return v;
}

extern "C" __global__ void __launch_bounds__(512) max_f32(const float* __restrict__ x, float* __restrict__ out,
                                                          int n) {
  __shared__ bool is_last;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  float acc = -CUDART_INF_F;
  long long done = 0;
  if (((unsigned long long)x & 15) == 0) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (long long i = tid; i < n4; i += stride) {
      const float4 v = x4[i];
      acc = fmaxf(acc, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) acc = fmaxf(acc, x[i]);
  acc = block_max(acc);
  if (threadIdx.x == 0) {
    g_partials[blockIdx.x] = acc;
    __threadfence();  // publish the partial before taking a ticket
    is_last = atomicAdd(&g_ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  float s = -CUDART_INF_F;
  for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) s = fmaxf(s, __ldcg(&g_partials[b]));  // from L2
  s = block_max(s);
  if (threadIdx.x == 0) {
    out[0] = s;
    g_ticket = 0;
  }
}

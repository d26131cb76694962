// Skinny-M HGEMM, NN: 1 rows of C x 256 columns per CTA, 16-byte streaming B loads,
// 4 loads in flight per thread, fp32 FMA, k-groups reduced in shared memory, split-K up to 16 via fp32 workspace atomics.
#include <cuda_fp16.h>
#include <stdint.h>

/*@launch
entry: skinny_nn_m1_bn256_sk16
block: 256
grid: cdiv(N, 256), min(16, cdiv(K, 32)), batch * cdiv(M, 1)
smem: 8192
workspace: batch * M * N * 4 + batch * cdiv(M, 1) * cdiv(N, 256) * 4
layouts: NN
@*/

namespace {
constexpr int NT = 256;

__device__ __forceinline__ uint4 ld_stream(const void* p) {
  // B is read exactly once: keep it out of L1 so A (re-read by every CTA) stays there.
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float2 h2f(uint32_t u) {
  return __half22float2(*reinterpret_cast<const __half2*>(&u));
}
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const float2 a = h2f(v.x), b = h2f(v.y), c = h2f(v.z), d = h2f(v.w);
  f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y; f[4] = c.x; f[5] = c.y; f[6] = d.x; f[7] = d.y;
}
__device__ __forceinline__ float ldh(const __half* p) { return __half2float(__ldg(p)); }

// Split-K epilogue shared by both kernels: add a partial into the fp32 workspace, then the last CTA
// to arrive for this tile (counter index `tile`) returns true and may convert the tile.
__device__ __forceinline__ bool arrive_last(void* workspace, long long mn_total, long long tile) {
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* counters = reinterpret_cast<int*>(reinterpret_cast<float*>(workspace) + mn_total);
    last = atomicAdd(counters + tile, 1) == (int)gridDim.y - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}
}  // namespace

constexpr int MT = 1, BN = 256, UNROLL = 4;
constexpr int TPN = BN / 8;          // threads across n, 8 columns (one 16-byte vector) each
constexpr int KG = NT / TPN;         // k-groups per CTA

extern "C" __global__ void __launch_bounds__(NT, 2)
skinny_nn_m1_bn256_sk16(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
          int M, int N, int K, int batch, void* workspace) {
  extern __shared__ float red[];     // [KG][MT][BN] partial sums
  const int mchunks = (M + MT - 1) / MT;
  const long long b = blockIdx.z / mchunks;
  const int m0 = (blockIdx.z % mchunks) * MT;
  const int nl = (threadIdx.x % TPN) * 8;   // local column of this thread's vector
  const int n = blockIdx.x * BN + nl;
  const int kg = threadIdx.x / TPN;
  const __half* Ab = A + b * M * K;
  const __half* Bb = B + b * K * N;

  // This CTA's k range: a multiple of KG per split so every k-group gets the same trip count.
  const int kper = ((K + KG - 1) / KG + gridDim.y - 1) / gridDim.y * KG;
  const int kbeg = blockIdx.y * kper, kend = min(K, kbeg + kper);

  // Rows past M read row M-1 (valid memory) and are never stored.
  const __half* arow[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) arow[m] = Ab + (long long)min(m0 + m, M - 1) * K;

  float acc[MT][8];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[m][e] = 0.f;

  const bool vec = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(B) % 16 == 0);
  if (vec) {
    if (n < N) {   // N % 8 == 0: the whole vector is in range
      int k = kbeg + kg;
      for (; k + (UNROLL - 1) * KG < kend; k += UNROLL * KG) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = ld_stream(Bb + (long long)(k + u * KG) * N + n);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          float f[8];
          unpack8(v[u], f);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            const float a = ldh(arow[m] + k + u * KG);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[m][e] = fmaf(a, f[e], acc[m][e]);
          }
        }
      }
      for (; k < kend; k += KG) {
        float f[8];
        unpack8(ld_stream(Bb + (long long)k * N + n), f);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float a = ldh(arow[m] + k);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][e] = fmaf(a, f[e], acc[m][e]);
        }
      }
    }
  } else {
    for (int k = kbeg + kg; k < kend; k += KG) {
      float f[8];
      const __half* row = Bb + (long long)k * N;
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = (n + e < N) ? ldh(row + n + e) : 0.f;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const float a = ldh(arow[m] + k);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][e] = fmaf(a, f[e], acc[m][e]);
      }
    }
  }

  // Reduce the KG k-groups through shared memory.
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int e = 0; e < 8; ++e) red[(kg * MT + m) * BN + nl + e] = acc[m][e];
  __syncthreads();
  const long long mn = (long long)batch * M * N;
  __half* Cb = C + b * M * N;
  float* ws = reinterpret_cast<float*>(workspace) + b * M * N;
  for (int i = threadIdx.x; i < MT * BN; i += NT) {
    const int m = i / BN, c = i % BN;
    const int row = m0 + m, col = blockIdx.x * BN + c;
    if (row >= M || col >= N) continue;
    float s = 0.f;
#pragma unroll
    for (int g = 0; g < KG; ++g) s += red[(g * MT + m) * BN + c];
    if (gridDim.y == 1) Cb[(long long)row * N + col] = __float2half_rn(s);
    else if (kbeg < kend) atomicAdd(ws + (long long)row * N + col, s);
  }
  if (gridDim.y == 1) return;
  const long long tile = (long long)blockIdx.z * gridDim.x + blockIdx.x;
  if (!arrive_last(workspace, mn, tile)) return;
  for (int i = threadIdx.x; i < MT * BN; i += NT) {
    const int row = m0 + i / BN, col = blockIdx.x * BN + i % BN;
    if (row < M && col < N) Cb[(long long)row * N + col] = __float2half_rn(__ldcg(ws + (long long)row * N + col));
  }
}

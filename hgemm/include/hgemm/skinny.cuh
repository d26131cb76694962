// hgemm/skinny.cuh: skinny-M HGEMM (a few rows of C per CTA), GEMV-like kernels that stream B once.
//
// With M this small the GEMM is a matrix-vector product bound by reading B (2*K*N bytes); the fp32
// CUDA-core work (2*M*K*N flops) stays under the FP32 ceiling for up to ~8 rows per CTA.
//   SkinnyNN<MT, BN, UNROLL> (B is K x N): a thread owns 8 consecutive columns and MT rows of C; it
//     walks k with stride KG (the CTA's k-groups), issuing UNROLL independent 16-byte B loads (L1
//     no-allocate) before using them; the KG partial sums meet in shared memory (SMEM_BYTES).
//   SkinnyTN<MT, NPW> (B is N x K): a warp owns NPW columns; lanes read 16-byte k-vectors of B and A
//     and the warp reduces with shuffles.
// Grid: (column tiles, k splits, batch * cdiv(M, MT)). With gridDim.y > 1 the partials go to a
// zero-filled fp32 workspace (batch * M * N floats, then an int counter per CTA column and z) and
// the last CTA of a tile converts it (splitk_arrive_last), leaving the workspace zero (splitk_take_tile,
// splitk_reset). Rows beyond M read a clamped (valid) A row
// and are never stored; columns beyond N are guarded. Misaligned rows (N % 8 for NN-B, K % 8 for A
// and TN-B, or unaligned base pointers) take a guarded element-wise loop chosen at run time.
//
//   extern "C" __global__ void __launch_bounds__(256, 2)
//   my_gemv(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
//           int M, int N, int K, int batch, void* workspace) {
//     hgemm::SkinnyNN<1, 256, 4>::run(A, B, C, M, N, K, batch, workspace);
//   }
//   launch: block 256, grid (cdiv(N, 256), splits, batch * M), smem SkinnyNN<1, 256, 4>::SMEM_BYTES
#pragma once

#include <hgemm/common.cuh>

namespace hgemm {

// 16 bytes read once: kept out of L1 so operands that are re-read (A, by every CTA) stay there.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float2 h2f(uint32_t u) {
  return __half22float2(*reinterpret_cast<const __half2*>(&u));
}
// 8 fp16 values of a 16-byte vector as fp32.
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const float2 a = h2f(v.x), b = h2f(v.y), c = h2f(v.z), d = h2f(v.w);
  f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y; f[4] = c.x; f[5] = c.y; f[6] = d.x; f[7] = d.y;
}
__device__ __forceinline__ float ldh(const __half* p) { return __half2float(__ldg(p)); }

template <int MT, int BN, int UNROLL, int NT = 256>
struct SkinnyNN {
  static constexpr int TPN = BN / 8;   // threads across n, 8 columns (one 16-byte vector) each
  static constexpr int KG = NT / TPN;  // k-groups per CTA
  static constexpr int SMEM_BYTES = KG * MT * BN * 4;   // [KG][MT][BN] fp32 partial sums
  static_assert(NT % TPN == 0, "the CTA's threads must split into whole k-groups");

  __device__ __forceinline__ static void run(const __half* __restrict__ A, const __half* __restrict__ B,
                                             __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
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
    if (!splitk_arrive_last(workspace, mn, tile)) return;
    splitk_take_tile<NT, MT, BN>(ws, Cb, m0, blockIdx.x * BN, M, N);
    splitk_reset(workspace, mn, tile);
  }
};

template <int MT, int NPW, int NT = 256>
struct SkinnyTN {
  static constexpr int WARPS = NT / 32;
  static constexpr int BN = WARPS * NPW;   // output columns per CTA
  static constexpr int SMEM_BYTES = 0;

  __device__ __forceinline__ static void run(const __half* __restrict__ A, const __half* __restrict__ B,
                                             __half* __restrict__ C, int M, int N, int K, int batch, void* workspace) {
    const int mchunks = (M + MT - 1) / MT;
    const long long b = blockIdx.z / mchunks;
    const int m0 = (blockIdx.z % mchunks) * MT;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = blockIdx.x * BN + warp * NPW;
    const __half* Ab = A + b * M * K;
    const __half* Bb = B + b * N * K;

    // k range of this split, in whole 256-element steps (32 lanes x 8 halves).
    const int kper = ((K + 255) / 256 + gridDim.y - 1) / gridDim.y * 256;
    const int kbeg = blockIdx.y * kper, kend = min(K, kbeg + kper);

    // Rows/columns past M/N read a clamped valid row and are never stored.
    const __half* arow[MT];
    const __half* brow[NPW];
#pragma unroll
    for (int m = 0; m < MT; ++m) arow[m] = Ab + (long long)min(m0 + m, M - 1) * K;
#pragma unroll
    for (int j = 0; j < NPW; ++j) brow[j] = Bb + (long long)min(n0 + j, N - 1) * K;

    float acc[MT][NPW];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NPW; ++j) acc[m][j] = 0.f;

    const bool vec = (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
    if (vec) {
      // K % 8 == 0 and kbeg % 8 == 0: each 8-vector is wholly inside or outside [kbeg, kend).
#pragma unroll 2
      for (int k = kbeg + lane * 8; k < kend; k += 256) {
        uint4 bv[NPW], av[MT];
#pragma unroll
        for (int j = 0; j < NPW; ++j) bv[j] = ld_stream(brow[j] + k);
#pragma unroll
        for (int m = 0; m < MT; ++m) av[m] = __ldg(reinterpret_cast<const uint4*>(arow[m] + k));
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          float fa[8];
          unpack8(av[m], fa);
#pragma unroll
          for (int j = 0; j < NPW; ++j) {
            float fb[8];
            unpack8(bv[j], fb);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[m][j] = fmaf(fa[e], fb[e], acc[m][j]);
          }
        }
      }
    } else {
      for (int k = kbeg + lane; k < kend; k += 32) {
        float fb[NPW];
#pragma unroll
        for (int j = 0; j < NPW; ++j) fb[j] = ldh(brow[j] + k);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const float a = ldh(arow[m] + k);
#pragma unroll
          for (int j = 0; j < NPW; ++j) acc[m][j] = fmaf(a, fb[j], acc[m][j]);
        }
      }
    }

#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NPW; ++j)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], o);

    __half* Cb = C + b * M * N;
    float* ws = reinterpret_cast<float*>(workspace) + b * M * N;
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NPW; ++j) {
          const int row = m0 + m, col = n0 + j;
          if (row >= M || col >= N) continue;
          if (gridDim.y == 1) Cb[(long long)row * N + col] = __float2half_rn(acc[m][j]);
          else if (kbeg < kend) atomicAdd(ws + (long long)row * N + col, acc[m][j]);
        }
    }
    if (gridDim.y == 1) return;
    const long long tile = (long long)blockIdx.z * gridDim.x + blockIdx.x;
    if (!splitk_arrive_last(workspace, (long long)batch * M * N, tile)) return;
    splitk_take_tile<NT, MT, BN>(ws, Cb, m0, blockIdx.x * BN, M, N);
    splitk_reset(workspace, (long long)batch * M * N, tile);
  }
};

}  // namespace hgemm

"""Skinny-M HGEMM family (M <= 8 per CTA chunk): GEMV-like kernels that stream B from HBM.

With M this small the GEMM is a matrix-vector product bound by reading B once (2*K*N bytes); the
fp32 CUDA-core work (2*M*K*N flops) stays under the ~67 TFLOP/s FP32 ceiling for M <= 8 at 4.3 TB/s.
For 16 <= M <= 64 the mma_sync family's 16x128 / 32x128 split-K tiles use tensor cores instead.

NN (B is K x N, contiguous along n): a thread owns 8 consecutive columns and MT rows of C; it walks
k with stride KG (the CTA's k-groups), issuing UNROLL independent 16-byte B loads (L1 no-allocate)
before using them, so many loads are in flight. The KG partial sums meet in shared memory.
TN (B is N x K, contiguous along k): a warp owns NPW columns; lanes read 16-byte k-vectors of B and A
and the warp reduces with shuffles.

Both split K over grid.y = min(SPLIT, ...) when the tile grid alone would underfill the GPU; partials
go to a zero-filled fp32 workspace with atomics and the last CTA per tile converts to fp16.
Rows beyond M read a clamped (valid) A row and are never stored; columns beyond N are guarded.
Misaligned rows (N % 8 for NN-B, K % 8 for A / TN-B, or unaligned base pointers) take a guarded
element-wise path chosen at run time.
"""

from __future__ import annotations

import itertools

NT = 256
MT_CHOICES = (1, 2, 4, 8)
NN_BN = (256, 512)          # columns per CTA: TPN = BN / 8 threads across n, KG = 256 / TPN k-groups
NN_UNROLL = 4               # B loads in flight per thread (2 for MT=8, whose 64 accumulators need the registers)
TN_NPW = (2, 4)             # output columns per warp
SPLITS = (1, 4, 16)


def variants() -> list[dict]:
    out = []
    for mt, bn, sk in itertools.product(MT_CHOICES, NN_BN, SPLITS):
        out.append(dict(kind="nn", mt=mt, bn=bn, split_k=sk))
    for mt, npw, sk in itertools.product(MT_CHOICES, TN_NPW, SPLITS):
        out.append(dict(kind="tn", mt=mt, npw=npw, split_k=sk))
    return out


def name(p: dict) -> str:
    if p["kind"] == "nn":
        return f"skinny_nn_m{p['mt']}_bn{p['bn']}_sk{p['split_k']}"
    return f"skinny_tn_m{p['mt']}_npw{p['npw']}_sk{p['split_k']}"


def applicable(p: dict, problem) -> bool:
    if problem.layout.lower() != p["kind"] or problem.M > 64:
        return False
    # Each CTA chunk re-reads B: only worth it when M needs at most a couple of chunks.
    if -(-problem.M // p["mt"]) > 2:
        return False
    ctas = (-(-problem.N // p["bn"]) if p["kind"] == "nn" else -(-problem.N // (8 * p["npw"]))) * problem.batch
    return p["split_k"] == 1 or ctas < 264


def _unroll(p: dict) -> int:
    return NN_UNROLL if p["mt"] <= 4 else 2


def _min_blocks(p: dict) -> int:
    # Two 256-thread CTAs per SM (<= 128 registers) keep enough 16-byte loads in flight; the one
    # variant whose accumulators do not fit in 128 registers without spilling runs one CTA.
    return 1 if p["kind"] == "tn" and p["mt"] * p["npw"] > 16 else 2


def _smem(p: dict) -> int:
    if p["kind"] == "nn":
        kg = NT // (p["bn"] // 8)
        return kg * p["mt"] * p["bn"] * 4
    return 0


def spec_text(p: dict) -> str:
    mchunks = f"cdiv(M, {p['mt']})"
    if p["kind"] == "nn":
        kg = NT // (p["bn"] // 8)
        tiles_x = f"cdiv(N, {p['bn']})"
        ksplit = f"min({p['split_k']}, cdiv(K, {kg * _unroll(p)}))"
    else:
        tiles_x = f"cdiv(N, {8 * p['npw']})"
        ksplit = f"min({p['split_k']}, cdiv(K, 256))"
    workspace = "0"
    if p["split_k"] > 1:
        workspace = f"batch * M * N * 4 + batch * {mchunks} * {tiles_x} * 4"
    return "\n".join([
        "/*@launch",
        f"entry: {name(p)}",
        f"block: {NT}",
        f"grid: {tiles_x}, {ksplit}, batch * {mchunks}",
        f"smem: {_smem(p)}",
        f"workspace: {workspace}",
        f"layouts: {p['kind'].upper()}",
        "@*/",
    ])


_COMMON = r"""
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
"""

_NN = r"""
constexpr int MT = __MT__, BN = __BN__, UNROLL = __UNROLL__;
constexpr int TPN = BN / 8;          // threads across n, 8 columns (one 16-byte vector) each
constexpr int KG = NT / TPN;         // k-groups per CTA

extern "C" __global__ void __launch_bounds__(NT, __MINB__)
__ENTRY__(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
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
"""

_TN = r"""
constexpr int MT = __MT__, NPW = __NPW__;
constexpr int WARPS = NT / 32;
constexpr int BN = WARPS * NPW;      // output columns per CTA

extern "C" __global__ void __launch_bounds__(NT, __MINB__)
__ENTRY__(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
          int M, int N, int K, int batch, void* workspace) {
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
  if (!arrive_last(workspace, (long long)batch * M * N, tile)) return;
  for (int i = threadIdx.x; i < MT * BN; i += NT) {
    const int row = m0 + i / BN, col = blockIdx.x * BN + i % BN;
    if (row < M && col < N) Cb[(long long)row * N + col] = __float2half_rn(__ldcg(ws + (long long)row * N + col));
  }
}
"""


def render(p: dict) -> str:
    if p["kind"] == "nn":
        body = _NN.replace("__BN__", str(p["bn"])).replace("__UNROLL__", str(_unroll(p)))
        desc = (f"// Skinny-M HGEMM, NN: {p['mt']} rows of C x {p['bn']} columns per CTA, 16-byte streaming B loads,\n"
                f"// {_unroll(p)} loads in flight per thread, fp32 FMA, k-groups reduced in shared memory")
    else:
        body = _TN.replace("__NPW__", str(p["npw"]))
        desc = (f"// Skinny-M HGEMM, TN: {p['mt']} rows of C, {p['npw']} columns per warp, 16-byte k-vectors of A and B,\n"
                f"// fp32 FMA, warp-shuffle reduction")
    body = body.replace("__MT__", str(p["mt"])).replace("__MINB__", str(_min_blocks(p))).replace("__ENTRY__", name(p))
    split = (f", split-K up to {p['split_k']} via fp32 workspace atomics.\n" if p["split_k"] > 1 else ".\n")
    return (desc + split + "#include <cuda_fp16.h>\n#include <stdint.h>\n\n" + spec_text(p) + "\n" + _COMMON + body)

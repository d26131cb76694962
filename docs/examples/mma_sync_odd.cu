// An mma.sync HGEMM for any M, N, K and batch (odd sizes and unaligned pointers included), composed
// from the header pieces: a 64x64x32 CTA tile of 2x2 warps (32x32 each), a 2-stage ring that loads
// with cp.async where the rows allow it and with realigned 16-byte loads where they do not, ldmatrix
// fragments into m16n8k16 mma.sync, grouped rasterisation and guarded half2 stores.
#include <hgemm/mma_sync_gemm.cuh>

/*@launch
entry: mma_sync_odd
block: 128
grid: cdiv(M, 64) * cdiv(N, 64), 1, batch
smem: 16384
layouts: NN, TN
@*/

namespace {
using namespace hgemm;

constexpr int BM = 64, BN = 64, BK = 32, NT = 128, WTM = 32, WTN = 32, MI = WTM / 16, NI = WTN / 8;
constexpr bool TN = kLayout == Layout::TN;
constexpr int A_CPR = BK / 8, B_ROWS = TN ? BN : BK, B_CPR = TN ? BK / 8 : BN / 8;
constexpr int A_BYTES = BM * BK * 2, STAGE_BYTES = A_BYTES + BK * BN * 2;
using LoadA = TileLoader<NT, BM, A_CPR>;        // A tile: rows m, cols k
using LoadB = TileLoader<NT, B_ROWS, B_CPR>;    // B tile: rows n, cols k (TN) or rows k, cols n (NN)

// k tile k0 of A and B into one stage, then a commit: cp.async when every row is 16-byte aligned,
// else register loads stored into the same swizzled layout (visible after the next __syncthreads).
template <bool ALIGNED>
__device__ __forceinline__ void load_stage(unsigned char* stage, const Operands& o, int k0) {
  if constexpr (ALIGNED) {
    const uint32_t s = smem_u32(stage);
    LoadA::async(s, o.A, o.m0, k0, o.M, o.K, o.K);
    if constexpr (TN) LoadB::async(s + A_BYTES, o.B, o.n0, k0, o.N, o.K, o.K);
    else LoadB::async(s + A_BYTES, o.B, k0, o.n0, o.K, o.N, o.N);
  } else {
    uint4 a[LoadA::ITERS], b[LoadB::ITERS];
    LoadA::fetch(a, o.A, o.m0, k0, o.M, o.K, o.K);
    if constexpr (TN) LoadB::fetch(b, o.B, o.n0, k0, o.N, o.K, o.K);
    else LoadB::fetch(b, o.B, k0, o.n0, o.K, o.N, o.N);
    LoadA::store(stage, a);
    LoadB::store(stage + A_BYTES, b);
  }
  cp_async_commit();
}

// This warp's 32x32 of one stage: BK/16 k-steps of ldmatrix + 2x4 mma.sync.
__device__ __forceinline__ void mma_stage(float (&acc)[MI][NI][4], uint32_t sa, uint32_t sb, int wm, int wn, int lane) {
#pragma unroll
  for (int ks = 0; ks < BK / 16; ++ks) {
    uint32_t a[MI][4], b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      ldsm_x4(a[mi], sa + swizzle_offset<A_CPR>(wm * WTM + mi * 16 + (lane & 15), ks * 2 + (lane >> 4)));
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {   // one x4 load: the b0, b1 registers of two n8 blocks
      uint32_t t[4];
      if constexpr (TN)
        ldsm_x4(t, sb + swizzle_offset<B_CPR>(wn * WTN + nj * 16 + (lane & 7) + ((lane >> 4) << 3),
                                              ks * 2 + ((lane >> 3) & 1)));
      else
        ldsm_x4_trans(t, sb + swizzle_offset<B_CPR>(ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                    (wn * WTN + nj * 16) / 8 + (lane >> 4)));
      b[2 * nj][0] = t[0]; b[2 * nj][1] = t[1];
      b[2 * nj + 1][0] = t[2]; b[2 * nj + 1][1] = t[3];
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma_m16n8k16(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
  }
}

template <bool ALIGNED>
__device__ __forceinline__ void mainloop(float (&acc)[MI][NI][4], unsigned char* smem, const Operands& o) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nk = (o.K + BK - 1) / BK;
  load_stage<ALIGNED>(smem, o, 0);
  for (int kt = 0; kt < nk; ++kt) {
    // refill the other stage (read in the previous iteration, before its closing barrier)
    if (kt + 1 < nk) load_stage<ALIGNED>(smem + ((kt + 1) & 1) * STAGE_BYTES, o, (kt + 1) * BK);
    else cp_async_commit();
    cp_async_wait<1>();   // every group but the newest has landed: tile kt
    __syncthreads();
    const uint32_t sa = smem_u32(smem + (kt & 1) * STAGE_BYTES);
    mma_stage(acc, sa, sa + A_BYTES, warp / 2, warp % 2, lane);
    __syncthreads();
  }
}
}  // namespace

extern "C" __global__ void __launch_bounds__(NT)
mma_sync_odd(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
             int M, int N, int K, int batch, void* workspace) {
  extern __shared__ __align__(128) unsigned char smem[];
  int tm, tn;
  grouped_tile(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, 8, tm, tn);
  const long long bz = blockIdx.z;
  const Operands o{A + bz * M * K, B + bz * K * N, M, N, K, tm * BM, tn * BN};

  float acc[MI][NI][4] = {};
  const bool aligned = K % 8 == 0 && (TN || N % 8 == 0) &&
                       ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
  if (aligned) mainloop<true>(acc, smem, o);
  else mainloop<false>(acc, smem, o);

  // m16n8 accumulators: lane (g = lane / 4, t = lane % 4) holds rows g, g + 8 and cols 2t, 2t + 1.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = o.m0 + (warp / 2) * WTM + (lane >> 2), col0 = o.n0 + (warp % 2) * WTN + (lane & 3) * 2;
  const bool pair = N % 2 == 0 && reinterpret_cast<uintptr_t>(C) % 4 == 0;
  __half* Cb = C + bz * M * N;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row0 + mi * 16 + h * 8, c = col0 + ni * 8;
        if (r < M) store_half2(Cb + (long long)r * N + c, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1], c, N, pair);
      }
}

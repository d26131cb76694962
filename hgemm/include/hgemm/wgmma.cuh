// wgmma (sm_90a): warpgroup MMA atoms straight from 128B-swizzled shared memory, their shared-memory
// matrix descriptors, and the fence / commit / wait that order them.
//
// An atom is wgmma.mma_async m64nBNk16, f32 += f16 * f16: 64 rows of A (K-major) times 16 x BN of B,
// accumulated into BN / 2 fp32 registers a thread of the warpgroup. A is always K-major; B is K-major
// in layout TN (B stored N x K) and N-major in layout NN (B stored K x N), read with imm-trans-b = 1.
//
// Accumulator layout of one m64nBN atom (what an epilogue needs): warp w of the warpgroup holds rows
// 16w..16w+15; register 4j + 2h + e of lane l is row 16w + l/4 + 8h, column 8j + 2(l%4) + e.
#pragma once

#include <stdint.h>

namespace hgemm {
namespace sm90 {

// The layout the harness compiles for: -DHGEMM_LAYOUT_TN picks TN (B stored N x K), else NN.
#ifdef HGEMM_LAYOUT_TN
constexpr bool kLayoutTN = true;
#else
constexpr bool kLayoutTN = false;
#endif

constexpr int kBK = 64;                     // 64 fp16 = 128 bytes: exactly one 128B-swizzle row
constexpr int kBoxBytes = 64 * 64 * 2;      // one 64 x 64 fp16 TMA box

// ---------------------------------------------------------------- descriptors
// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4           bits 16-29  leading-dimension byte offset >> 4
//   bits 32-45  stride-dimension byte offset >> 4
//   bits 49-51  base offset: 0, every swizzle pattern we point into starts on a 1024-byte boundary
//               (start addresses are stage base + multiples of 32 (K-major k-steps, inside the first
//               128-byte row, so (addr >> 7) & 7 == 0) or of 1024)
//   bits 62-63  swizzle mode: 1 = 128B
// The 128B swizzle is a function of the absolute smem address: 16-byte chunk bits [4:6] are XORed
// with the 128-byte row bits [7:9]. TMA writes box element (row r, col c) (64 fp16 per row) at
// pre-swizzle offset r * 128 + 2c from a 1024-aligned base, so both sides agree as long as every
// stage base is 1024-aligned.
//
// K-major operand (A always; B in TN), tile = R rows x 64 k, row r at r * 128 bytes:
//   canonical ((8, m), (8, 2k)) : ((128 B, SBO), (16 B, -)), SBO = 1024 (8 rows of 128 B), LBO unused
//   (the 16-wide k slice of one wgmma, 32 bytes, lies inside a 128-byte row; set to 1 by convention).
//   k-step kk (k = 16kk..16kk+15) starts at base + 32 * kk; m atom mt at base + mt * 64 * 128.
// MN-major operand (B in NN), tile = 64 k-rows x BN n, stored as BN/64 boxes of 64 k-rows x 64 n
// (128 B per k-row), box j at base + j * 8192:
//   canonical ((8 n, 8, j), (8 k, 2)) : ((2 B, 16 B, LBO), (128 B, SBO)): LBO = 8192, the stride between
//   64-wide n blocks (boxes); SBO = 1024, the stride between groups of 8 k-rows.
//   k-step kk starts at base + kk * 16 * 128 = base + 2048 * kk (1024-aligned).
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4)
       | (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16)
       | (static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32)
       | (1ull << 62);
}
// k-step kk of a K-major tile of 128-byte rows at `base` (A, and B in TN).
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t base, int kk) { return make_desc(base + kk * 32, 16, 1024); }
// k-step kk of an N-major B stage at `base` (NN): 64 k-rows of BN / 64 boxes of 64 n.
__device__ __forceinline__ uint64_t desc_nmajor(uint32_t base, int kk) { return make_desc(base + kk * 2048, kBoxBytes, 1024); }
// k-step kk of the B stage at `base` in the layout TN picks.
template <bool TN>
__device__ __forceinline__ uint64_t desc_b(uint32_t base, int kk) {
  if constexpr (TN) return desc_kmajor(base, kk);
  else return desc_nmajor(base, kk);
}

// ---------------------------------------------------------------- ordering
// wgmma.fence orders this warpgroup's earlier register accesses (epilogue reads of the accumulators,
// previous wgmma) before the wgmma.mma_async that follow; commit_group closes a group; wait_group N
// blocks until at most N groups are pending, after which their smem reads and register writes are done.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Tells the compiler that a register may change here, so that no accumulator access is moved across
// a wgmma issue/wait point (the asm statements alone do not name the accumulators).
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
template <int MT, int NREG>
__device__ __forceinline__ void fence_acc(float (&acc)[MT][NREG]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < NREG; ++i) fence_reg(acc[mt][i]);
}

// ---------------------------------------------------------------- atoms
// WgmmaAtom<BN>::mma<TRANS_B>(d, desc_a, desc_b, scale_d):
// D(64 x BN, fp32) = (scale_d ? D : 0) + A(64 x 16) * B(16 x BN). imm-scale-a/b = 1 (no negation),
// imm-trans-a = 0 (A K-major), imm-trans-b = TRANS_B (0: B K-major (TN), 1: B N-major (NN)).
template <int BN>
struct WgmmaAtom;

template <>
struct WgmmaAtom<64> {
  template <int TRANS_B>
  static __device__ __forceinline__ void mma(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, "
        "%32, %33, p, 1, 1, 0, %35;\n}\n"
        :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
  }
};

template <>
struct WgmmaAtom<128> {
  template <int TRANS_B>
  static __device__ __forceinline__ void mma(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, "
        "%64, %65, p, 1, 1, 0, %67;\n}\n"
        :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
  }
};

template <>
struct WgmmaAtom<192> {
  template <int TRANS_B>
  static __device__ __forceinline__ void mma(float (&d)[96], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, "
        "%96, %97, p, 1, 1, 0, %99;\n}\n"
        :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
  }
};

template <>
struct WgmmaAtom<256> {
  template <int TRANS_B>
  static __device__ __forceinline__ void mma(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, "
        "%128, %129, p, 1, 1, 0, %131;\n}\n"
        :
        "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));
  }
};

template <int BN, bool TN>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  WgmmaAtom<BN>::template mma<TN ? 0 : 1>(d, desc_a, desc_b, scale_d);
}

// One 64-wide k stage of a consumer warpgroup: MT m64 atoms of A (rows 64 apart from `sa`, 128-byte
// rows, K-major) times the stage's B at `sb`, as 4 k16 steps, committed as one wgmma group. The first
// k step of a tile overwrites the accumulators (`accumulate` false: scale-d = 0). The fences keep
// the compiler from moving accumulator accesses across the asynchronous MMAs.
template <int MT, int BN, bool TN>
__device__ __forceinline__ void wgmma_k64(float (&acc)[MT][BN / 2], uint32_t sa, uint32_t sb, bool accumulate) {
  wgmma_fence();
  fence_acc(acc);
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    const uint64_t db = desc_b<TN>(sb, kk);
    const int scale_d = (accumulate || kk > 0) ? 1 : 0;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_tile<BN, TN>(acc[mt], desc_kmajor(sa + mt * 64 * 128, kk), db, scale_d);
  }
  wgmma_commit();
  fence_acc(acc);
}

}  // namespace sm90
}  // namespace hgemm

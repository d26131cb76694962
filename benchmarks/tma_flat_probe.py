"""GPU probe: can TMA feed a wgmma kernel from rows that are not 16-byte aligned (K or N odd)?

A 2-D tensor map needs 16-byte row pitches, which is why the wgmma family declines misaligned shapes.
The idea tested here: describe the operand as one flat row (a one-row rank-2 map, `flat_map_args`;
the driver refuses rank-1 maps) and load each tile row as its own 64-element box at an
arbitrary element coordinate, into the shared-memory row where a 2-D box would have put it.

The PTX ISA (section 5.5.3.1, tiled mode) says "the address of the bounding box must also be aligned
to 16 bytes"; a box that starts at an element coordinate that is not a multiple of 8 fp16 breaks that
rule. The cases therefore separate three things: box start alignment, swizzle, and the shared-memory
placement of one-row swizzled boxes. See benchmarks/tma_flat/README.md.

Every case runs in its own subprocess, because a fault (cudaErrorIllegalInstruction, for one)
leaves the CUDA context unusable; the JSON is rewritten after every case with its status:
ok, wrong_data, encode_refused, crashed, hung or error. Swizzle NONE cases run first. Every case
checks the bytes TMA put in shared memory against a numpy model of fresh random data.

    python -m benchmarks.tma_flat_probe [--out FILE] [--only TEXT] [--case-timeout S]
        (GPU; $OUT/tma_flat_probe.json by default)
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROWS = 16                # rows per layout case
BOX = 64                 # fp16 elements per box row: 128 bytes, the 128B swizzle span
STAGES, TILE_M = 4, 128  # the rate kernel's ring: 4 stages of 128 x 64 fp16
SWIZZLE_BYTES = {"NONE": 0, "128B": 128}
DATA_MAX = 0x7BFF        # largest finite positive fp16 pattern: draws in [1, DATA_MAX] are never 0, Inf or NaN
SENTINEL = 0xFFFF        # a NaN pattern no draw produces: shared memory TMA never wrote still holds it
RESULT_TAG = "TMA_FLAT_RESULT "
STATUSES = ("ok", "wrong_data", "encode_refused", "crashed", "hung", "error")

SOURCE = r"""
#include <cuda.h>
#include <stdint.h>

constexpr uint16_t SENTINEL = 0xFFFFu;
// A wait this long means the expected bytes never arrived; the kernel gives up instead of hanging.
constexpr unsigned long long WAIT_LIMIT_NS = 2000000000ull;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void bar_init(uint32_t b, uint32_t n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(b), "r"(n) : "memory");
}
// One arrival plus `bytes` of expected transactions; every box's complete_tx retires its full box size,
// out-of-bounds (zero-filled) elements included.
__device__ __forceinline__ void bar_expect(uint32_t b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(b) : "memory");
}
__device__ __forceinline__ bool bar_try(uint32_t b, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done) : "r"(b), "r"(parity) : "memory");
  return done != 0;
}
// Wait for the phase with this parity; on timeout mark status[0] = 2 and return false.
__device__ bool bar_wait(uint32_t b, uint32_t parity, uint32_t* status) {
  const uint64_t t0 = now_ns();
  while (!bar_try(b, parity))
    if (now_ns() - t0 > WAIT_LIMIT_NS) { atomicExch(status, 2u); return false; }
  return true;
}
// The destination is this CTA's shared address used as a .shared::cluster address: a launch without
// clusters is a cluster of one CTA, and the toolkit's own cp_async_bulk_tensor_2d_global_to_shared
// emits the same form. The one-row flat map is addressed with c1 = 0.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* m, uint32_t bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(reinterpret_cast<uint64_t>(m)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void prefetch_map(const CUtensorMap* m) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<uint64_t>(m)) : "memory");
}

// Layout: `rows` boxes of 64 fp16, row r from flat element r * stride + offset into shared memory at
// base + r * dst_pitch (base 1024-aligned), or (two_d) one 64 x rows box from a 2-D map at (offset, 0).
// The destination is first filled with SENTINEL so bytes TMA never wrote show up on the host.
extern "C" __global__ void flat_layout(const __grid_constant__ CUtensorMap map, int rows, int stride, int offset,
                                       int dst_pitch, int two_d, uint16_t* out, uint32_t* status) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
  uint16_t* dst = reinterpret_cast<uint16_t*>(smem_raw + (base - raw));
  const uint32_t b = smem_u32(&bar);
  for (int i = threadIdx.x; i < rows * dst_pitch / 2; i += blockDim.x) dst[i] = SENTINEL;
  // The sentinel stores (generic proxy) must be ordered before the TMA writes (async proxy) to the same bytes.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  if (threadIdx.x == 0) {
    bar_init(b, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    prefetch_map(&map);
    bar_expect(b, rows * 128);
    if (two_d) {
      tma_load_2d(base, &map, b, offset, 0);
    } else {
      for (int r = 0; r < rows; ++r) tma_load_2d(base + r * dst_pitch, &map, b, r * stride + offset, 0);
    }
  }
  if (!bar_wait(b, 0, status)) return;
  for (int i = threadIdx.x; i < rows * 64; i += blockDim.x) out[i] = dst[(i / 64) * (dst_pitch / 2) + i % 64];
}

// Rate: persistent CTAs stream every (128-row, 64-column) tile of an M x K matrix through a 4-stage
// ring, as a GEMM producer would for A. flat = 1: one 64-element box per row from the one-row map,
// issued by the 32 lanes of warp 0; flat = 0: one 64 x 128 box from a 2-D map (needs K % 8 == 0).
// With sums != 0 the consumer warp stores, per tile, sum over the first rows * 64 stage words of
// (position + 1) * word, for the host to compare; with sums == 0 it only waits and releases (timing).
constexpr int STAGES = 4, STAGE_BYTES = 128 * 128;
extern "C" __global__ void __launch_bounds__(64, 1)
stream_tiles(const __grid_constant__ CUtensorMap map, int M, int K, int flat, uint32_t* sums, uint32_t* status) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
  const int tiles_m = (M + 127) / 128, ktiles = (K + 63) / 64, total = tiles_m * ktiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) { bar_init(smem_u32(&full[s]), 1); bar_init(smem_u32(&empty[s]), 1); }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    prefetch_map(&map);
  }
  __syncthreads();
  int stage = 0;
  uint32_t phase = 0;
  for (int t = blockIdx.x; t < total; t += gridDim.x) {
    const int m0 = (t / ktiles) * 128, k0 = (t % ktiles) * 64, rows = min(128, M - m0);
    const uint32_t fb = smem_u32(&full[stage]), eb = smem_u32(&empty[stage]), dst = base + stage * STAGE_BYTES;
    if (warp == 0) {
      const bool free_stage = lane == 0 ? bar_wait(eb, phase ^ 1u, status) : true;
      if (!__all_sync(0xffffffffu, free_stage)) return;
      if (flat) {
        if (lane == 0) bar_expect(fb, rows * 128);
        __syncwarp();
        for (int r = lane; r < rows; r += 32) tma_load_2d(dst + r * 128, &map, fb, (m0 + r) * K + k0, 0);
      } else if (lane == 0) {
        bar_expect(fb, STAGE_BYTES);
        tma_load_2d(dst, &map, fb, k0, m0);
      }
    } else if (sums) {
      // every lane waits itself: each reads the stage below
      if (!bar_wait(fb, phase, status)) return;
      const uint16_t* tile = reinterpret_cast<const uint16_t*>(smem_raw + (dst - raw));
      uint32_t acc = 0;
      for (int p = lane; p < rows * 64; p += 32) acc += (uint32_t)(p + 1) * tile[p];
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) { sums[t] = acc; bar_arrive(eb); }
    } else if (lane == 0) {
      if (!bar_wait(fb, phase, status)) return;
      bar_arrive(eb);
    }
    if (++stage == STAGES) { stage = 0; phase ^= 1u; }
  }
  // drain: the producer waits for the last releases, so no TMA write is outstanding at exit
  if (warp == 0 && lane == 0)
    for (int i = 0; i < STAGES; ++i) {
      if (!bar_wait(smem_u32(&empty[stage]), phase ^ 1u, status)) return;
      if (++stage == STAGES) { stage = 0; phase ^= 1u; }
    }
}
"""


# ---------------------------------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class LayoutCase:
    """ROWS boxes into shared memory, copied out whole. mode "flat": one-row boxes from the flat map at
    element r * stride + offset, placed dst_pitch bytes apart; mode "2d": one 64 x ROWS box from a
    stride-pitched 2-D map at column `offset` (the harness control, as the wgmma kernels load)."""

    name: str
    mode: str
    stride: int
    offset: int
    swizzle: str
    dst_pitch: int = 128
    kind: str = "layout"


@dataclass(frozen=True)
class RateCase:
    """Stream every 128 x 64 tile of an M x K matrix, checked by per-tile sums, then timed."""

    name: str
    mode: str
    M: int
    K: int
    swizzle: str
    kind: str = "rate"


def layout_cases() -> list[LayoutCase]:
    # NONE first; within a swizzle, controls (aligned box starts) before the misaligned ones.
    return [
        LayoutCase("layout_2d_s4096_NONE", "2d", 4096, 0, "NONE"),
        LayoutCase("layout_flat_s4096_o0_NONE", "flat", 4096, 0, "NONE"),
        LayoutCase("layout_flat_s4096_o1_NONE", "flat", 4096, 1, "NONE"),
        LayoutCase("layout_flat_s4095_o3_NONE", "flat", 4095, 3, "NONE"),
        LayoutCase("layout_2d_s4096_128B", "2d", 4096, 0, "128B"),
        # one swizzled row per 1024-byte atom: the pattern's row phase is 0 for every box
        LayoutCase("layout_flat_s4096_o0_128B_p1024", "flat", 4096, 0, "128B", 1024),
        # rows 128 bytes apart: the phase comes from the destination address alone
        LayoutCase("layout_flat_s4096_o0_128B_p128", "flat", 4096, 0, "128B"),
        LayoutCase("layout_flat_s4095_o3_128B_p128", "flat", 4095, 3, "128B"),
        LayoutCase("layout_flat_s4097_o1_128B_p128", "flat", 4097, 1, "128B"),
    ]


def rate_cases() -> list[RateCase]:
    return [
        RateCase("rate_2d_4096_128B", "2d", 4096, 4096, "128B"),
        RateCase("rate_flat_4096_NONE", "flat", 4096, 4096, "NONE"),
        RateCase("rate_flat_4096_128B", "flat", 4096, 4096, "128B"),
        RateCase("rate_flat_4095_NONE", "flat", 4095, 4095, "NONE"),
        RateCase("rate_flat_4095_128B", "flat", 4095, 4095, "128B"),
        RateCase("rate_flat_8191_128B", "flat", 8191, 8191, "128B"),
        RateCase("rate_2d_8192_128B", "2d", 8192, 8192, "128B"),
    ]


def all_cases() -> list:
    return layout_cases() + rate_cases()


def case_by_name(name: str):
    for case in all_cases():
        if case.name == name:
            return case
    raise KeyError(f"no case named {name!r}")


# ------------------------------------------------------------------ tensor map arguments and their rules

def tiled_map_problems(ptr: int, dims: list[int], strides: list[int], box: list[int], swizzle: int) -> list[str]:
    """The documented cuTensorMapEncodeTiled requirements (cuda.h, CUDA 13.0) that these arguments break,
    for fp16 with interleave NONE and element strides 1, plus the 128-byte global memory alignment that
    the CUDA C++ Programming Guide's swizzle table (TMA Swizzle, Table 12) gives for swizzled modes,
    checked on the base address only (the guide does not say whether it covers strides)."""
    problems = []
    rank = len(dims)
    if not 1 <= rank <= 5:
        problems.append(f"rank {rank} outside 1..5")
    if len(strides) != rank - 1 or len(box) != rank:
        problems.append("strides must have rank - 1 entries and box rank entries")
    if ptr % 16:
        problems.append("globalAddress not 16-byte aligned")
    if swizzle and ptr % 128:
        problems.append("swizzled map: global memory not 128-byte aligned (Programming Guide, Table 12)")
    problems += [f"globalDim[{i}] = {d} outside 1..2^32" for i, d in enumerate(dims) if not 1 <= d <= 2**32]
    for i, s in enumerate(strides):
        if s % 16 or not 0 < s < 2**40:
            problems.append(f"globalStrides[{i}] = {s} is not a positive multiple of 16 below 2^40")
    if strides and strides[0] < dims[0] * 2:
        problems.append(f"globalStrides[0] = {strides[0]} is shorter than a row of {dims[0]} fp16")
    problems += [f"boxDim[{i}] = {b} outside 1..256" for i, b in enumerate(box) if not 1 <= b <= 256]
    if box and (box[0] * 2) % 16:
        problems.append(f"boxDim[0] * 2 = {box[0] * 2} bytes is not a multiple of 16")
    if swizzle and box and box[0] * 2 > swizzle:
        problems.append(f"inner box of {box[0] * 2} bytes exceeds the {swizzle}-byte swizzle span")
    return problems


def flat_map_args(n: int, swizzle: str) -> dict:
    """n fp16 elements as one row of a rank-2 map, boxes of 64 x 1. The row stride is never used for
    addressing (there is one row); it is rounded up to 128 bytes so that a swizzled map meets the
    Programming Guide's 128-byte global alignment as well as the driver's multiple of 16."""
    row_bytes = n * 2
    return {"dims": [n, 1], "strides": [(row_bytes + 127) // 128 * 128], "box": [BOX, 1],
            "swizzle": SWIZZLE_BYTES[swizzle]}


def matrix_map_args(cols: int, rows: int, box_rows: int, swizzle: str) -> dict:
    """A row-major rows x cols fp16 matrix as a 2-D map, boxes of 64 x box_rows."""
    return {"dims": [cols, rows], "strides": [cols * 2], "box": [BOX, box_rows], "swizzle": SWIZZLE_BYTES[swizzle]}


def layout_data_len(case: LayoutCase) -> int:
    if case.mode == "2d":
        return ROWS * case.stride
    # the last row's box runs 24 elements past the end of the buffer: those must come back zero
    return (ROWS - 1) * case.stride + case.offset + BOX - 24


def layout_map_args(case: LayoutCase) -> dict:
    if case.mode == "2d":
        return matrix_map_args(case.stride, ROWS, ROWS, case.swizzle)
    return flat_map_args(layout_data_len(case), case.swizzle)


def rate_map_args(case: RateCase) -> dict:
    if case.mode == "2d":
        return matrix_map_args(case.K, case.M, TILE_M, case.swizzle)
    return flat_map_args(case.M * case.K, case.swizzle)


def box_starts(case: LayoutCase) -> list[int]:
    """Element coordinate (dimension 0) of each box the layout kernel issues."""
    if case.mode == "2d":
        return [case.offset]
    return [r * case.stride + case.offset for r in range(ROWS)]


def misaligned(coords) -> int:
    """How many box starts break PTX 5.5.3.1's 16-byte bounding-box alignment (8 fp16)."""
    return sum(1 for c in coords if (c * 2) % 16)


def rate_misaligned_boxes(case: RateCase) -> tuple[int, int]:
    """(misaligned, total) box starts in a rate case: flat boxes start at m * K + k0, k0 a multiple of 64."""
    tiles_m, ktiles = -(-case.M // TILE_M), -(-case.K // BOX)
    if case.mode == "2d":
        return 0, tiles_m * ktiles
    bad_rows = sum(1 for m in range(case.M) if (m * case.K) % 8)
    return bad_rows * ktiles, case.M * ktiles


def describe(case) -> dict:
    """What a case is, as recorded in the JSON even when it crashes."""
    out = asdict(case)
    if isinstance(case, LayoutCase):
        out["map"] = layout_map_args(case)
        out["boxes"] = len(box_starts(case))
        out["misaligned_boxes"] = misaligned(box_starts(case))
    else:
        out["map"] = rate_map_args(case)
        out["misaligned_boxes"], out["boxes"] = rate_misaligned_boxes(case)
    return out


# ------------------------------------------------------------------------------- host-side reference model

def random_fp16_bits(n: int, rng):
    """Fresh fp16 bit patterns: positive, finite, never zero, never the sentinel."""
    import numpy as np

    return rng.integers(1, DATA_MAX + 1, size=n, dtype=np.uint16)


def expected_rows(data, case: LayoutCase):
    """ROWS x 64 elements each box should deliver, before any swizzle. Flat boxes run on into the next
    row and past the end of the buffer (zero-filled there); 2-D boxes are zero past column `stride`."""
    import numpy as np

    want = np.zeros((ROWS, BOX), dtype=np.uint16)
    for r in range(ROWS):
        if case.mode == "2d":
            start, end = r * case.stride + case.offset, (r + 1) * case.stride
        else:
            start, end = r * case.stride + case.offset, len(data)
        avail = max(0, min(BOX, end - start))
        want[r, :avail] = data[start:start + avail]
    return want


def swizzle_phase(row_byte_offset: int, swizzle: str) -> int:
    """The 128B pattern's row phase at a destination offset from a 1024-aligned base: the Programming
    Guide's offset (address / 128) % 8 (Table 11); 0 without swizzle."""
    return (row_byte_offset // 128) % 8 if swizzle == "128B" else 0


def apply_swizzle(rows, phases):
    """16-byte chunk c of row r lands in slot c ^ phases[r]."""
    import numpy as np

    out = np.empty_like(rows)
    for r, ph in enumerate(phases):
        chunks = rows[r].reshape(8, 8)
        out[r] = chunks[[s ^ ph for s in range(8)]].reshape(BOX)
    return out


def expected_smem_rows(data, case: LayoutCase):
    """What the layout kernel copies out: each destination row's 128 bytes as TMA should leave them."""
    pitch = 128 if case.mode == "2d" else case.dst_pitch
    return apply_swizzle(expected_rows(data, case), [swizzle_phase(r * pitch, case.swizzle) for r in range(ROWS)])


def compare_rows(got, want) -> dict:
    """Status and the details that say how a layout went wrong."""
    import numpy as np

    bad = got != want
    zero_slots = want == 0
    return {
        "status": "wrong_data" if bad.any() else "ok",
        "wrong_elems": int(bad.sum()),
        "wrong_rows": [int(r) for r in np.flatnonzero(bad.any(axis=1))],
        "unwritten_elems": int((got == SENTINEL).sum()),
        "zero_fill_ok": bool((got[zero_slots] == 0).all()) if zero_slots.any() else None,
    }


def stage_weights(swizzle: str):
    """(128, 64) weights of the rate kernel's per-tile sum: 1 + the 16-bit word position in the stage
    where element (r, j) lands, stage base 1024-aligned and rows 128 bytes apart."""
    import numpy as np

    r = np.arange(TILE_M)[:, None]
    j = np.arange(BOX)[None, :]
    phase = np.array([swizzle_phase(int(x) * 128, swizzle) for x in range(TILE_M)])[:, None]
    return (r * BOX + ((j // 8) ^ phase) * 8 + j % 8 + 1).astype(np.int64)


def expected_tile_sums(data, M: int, K: int, mode: str, swizzle: str):
    """Per tile (t = tile_row * ktiles + ktile), the sum the checking consumer stores, mod 2^32. Rows
    past M are not summed (flat mode never loads them); columns past K are the next row's first
    elements in flat mode and zeros in 2-D mode."""
    import numpy as np

    tiles_m, ktiles = -(-M // TILE_M), -(-K // BOX)
    weights = stage_weights(swizzle)
    cols = np.arange(ktiles * BOX)
    sums = np.empty((tiles_m, ktiles), dtype=np.uint32)
    padded = np.concatenate([data, np.zeros(BOX, dtype=data.dtype)]) if mode == "flat" else None
    matrix = data.reshape(M, K) if mode == "2d" else None
    for tm in range(tiles_m):
        m0 = tm * TILE_M
        valid = min(TILE_M, M - m0)
        if mode == "flat":
            rows = np.arange(m0, m0 + valid, dtype=np.int64)[:, None]
            vals = padded[rows * K + cols[None, :]].astype(np.int64)
        else:
            vals = np.zeros((valid, ktiles * BOX), dtype=np.int64)
            vals[:, :K] = matrix[m0:m0 + valid]
        per_tile = np.einsum("rkj,rj->k", vals.reshape(valid, ktiles, BOX), weights[:valid])
        sums[tm] = (per_tile % 2**32).astype(np.uint32)
    return sums.reshape(-1)


# ------------------------------------------------------------------------------------------------- build

def build(workdir: Path) -> Path:
    from hgemm.compile import find_nvcc, gencode

    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found")
    src, cubin = workdir / "tma_flat_probe.cu", workdir / "tma_flat_probe.cubin"
    src.write_text(SOURCE)
    proc = subprocess.run([nvcc, "-cubin", gencode("sm_90a"), "-O3", "-std=c++17", "-o", str(cubin), str(src)],
                          check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed:\n{proc.stdout}{proc.stderr}")
    return cubin


# ------------------------------------------------------------------------------ one case, in a child (GPU)

def layout_params(tmap: bytes, case: LayoutCase, out_ptr: int, status_ptr: int) -> list:
    from hgemm.params import Param

    return [Param("T", tmap), Param("i", ROWS), Param("i", case.stride), Param("i", case.offset),
            Param("i", 128 if case.mode == "2d" else case.dst_pitch), Param("i", int(case.mode == "2d")),
            Param("P", out_ptr), Param("P", status_ptr)]


def rate_params(tmap: bytes, case: RateCase, sums_ptr: int, status_ptr: int) -> list:
    from hgemm.params import Param

    return [Param("T", tmap), Param("i", case.M), Param("i", case.K), Param("i", int(case.mode == "flat")),
            Param("P", sums_ptr), Param("P", status_ptr)]


def load_kernel(cubin: str, entry: str):
    """The kernel, refusing to go on without the driver's parameter offsets: a CUtensorMap packed at a
    guessed offset is a garbage descriptor, which faults like the crash this probe chases."""
    from hgemm.runtime import LoadedKernel

    kernel = LoadedKernel(cubin, entry)
    if kernel.param_layout is None:
        raise RuntimeError("the driver did not report the parameter layout (cuFuncGetParamInfo)")
    return kernel


def encode_checked(ptr: int, args: dict) -> tuple[bytes | None, dict | None]:
    """(tensor map, None), or (None, an encode_refused result) naming who refused it."""
    from hgemm.tensormap import encode_tiled

    problems = tiled_map_problems(ptr, **args)
    if problems:
        return None, {"status": "encode_refused", "by": "documented constraints", "why": problems}
    try:
        return encode_tiled(ptr, args["dims"], args["strides"], args["box"], args["swizzle"]), None
    except ValueError as e:
        return None, {"status": "encode_refused", "by": "driver", "why": [str(e)]}


def launch_and_sync(kernel, grid, block, buf: bytes, smem: int) -> dict | None:
    """None, or a crashed result carrying the driver's text."""
    from hgemm.runtime import KernelLaunchError, synchronize

    try:
        kernel.launch(grid, block, buf, smem)
        synchronize()
    except KernelLaunchError as e:
        return {"status": "crashed", "error": str(e)[:600], "sticky": e.sticky}
    return None


def run_layout_case(case: LayoutCase, cubin: str, seed: int) -> dict:
    import numpy as np
    import torch

    from hgemm.params import pack_params

    data = random_fp16_bits(layout_data_len(case), np.random.default_rng(seed))
    src = torch.from_numpy(data.view(np.int16)).cuda()
    tmap, refused = encode_checked(src.data_ptr(), layout_map_args(case))
    if refused:
        return refused
    kernel = load_kernel(cubin, "flat_layout")
    out = torch.zeros(ROWS * BOX, dtype=torch.int16, device="cuda")
    status = torch.zeros(1, dtype=torch.int32, device="cuda")
    pitch = 128 if case.mode == "2d" else case.dst_pitch
    smem = ROWS * pitch + 1024  # + the slack the kernel's 1024-byte round-up may use
    kernel.prepare_smem(smem)
    buf = pack_params(layout_params(tmap, case, out.data_ptr(), status.data_ptr()), kernel.param_layout)
    crashed = launch_and_sync(kernel, (1, 1, 1), (128, 1, 1), buf, smem)
    if crashed:
        return crashed
    if int(status.item()) == 2:
        return {"status": "hung", "error": "the kernel's mbarrier wait timed out: the boxes' bytes never all arrived"}
    got = out.cpu().numpy().view(np.uint16).reshape(ROWS, BOX)
    return compare_rows(got, expected_smem_rows(data, case))


def time_launches(launch, repeats: int = 5) -> dict:
    """Kernel-only times from events around each launch: one after evicting L2 (cold), then L2-warm."""
    import torch

    def one() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3

    torch.empty(1 << 28, dtype=torch.uint8, device="cuda").zero_()  # 256 MiB through L2 before the cold pass
    cold = one()
    warm = sorted(one() for _ in range(repeats))
    return {"cold_us": cold, "warm_us": warm[len(warm) // 2], "warm_all_us": warm}


def run_rate_case(case: RateCase, cubin: str, seed: int) -> dict:
    import numpy as np
    import torch

    from hgemm.params import pack_params

    data = random_fp16_bits(case.M * case.K, np.random.default_rng(seed))
    a = torch.from_numpy(data.view(np.int16)).cuda()
    tmap, refused = encode_checked(a.data_ptr(), rate_map_args(case))
    if refused:
        return refused
    kernel = load_kernel(cubin, "stream_tiles")
    smem = STAGES * TILE_M * BOX * 2 + 1024
    kernel.prepare_smem(smem)
    tiles = -(-case.M // TILE_M) * -(-case.K // BOX)
    grid = (min(torch.cuda.get_device_properties(0).multi_processor_count, tiles), 1, 1)
    sums = torch.zeros(tiles, dtype=torch.int32, device="cuda")
    status = torch.zeros(1, dtype=torch.int32, device="cuda")
    check_buf = pack_params(rate_params(tmap, case, sums.data_ptr(), status.data_ptr()), kernel.param_layout)
    crashed = launch_and_sync(kernel, grid, (64, 1, 1), check_buf, smem)
    if crashed:
        return crashed
    if int(status.item()) == 2:
        return {"status": "hung", "error": "an mbarrier wait timed out: a stage's bytes never all arrived"}
    got = sums.cpu().numpy().view(np.uint32)
    want = expected_tile_sums(data, case.M, case.K, case.mode, case.swizzle)
    wrong = np.flatnonzero(got != want)
    result = {"status": "wrong_data" if len(wrong) else "ok", "tiles": tiles, "wrong_tiles": len(wrong),
              "first_wrong_tiles": [int(t) for t in wrong[:8]]}
    if len(wrong):
        return result  # the rate of a loader that delivers the wrong bytes answers nothing
    time_buf = pack_params(rate_params(tmap, case, 0, status.data_ptr()), kernel.param_layout)
    try:
        timing = time_launches(lambda: kernel.launch(grid, (64, 1, 1), time_buf, smem))
    except RuntimeError as e:  # KernelLaunchError, or torch's error from the event sync after a fault
        return {**result, "status": "crashed", "error": f"while timing: {e}"[:600]}
    if int(status.item()) == 2:
        return {**result, "status": "hung", "error": "an mbarrier wait timed out while timing"}
    nbytes = case.M * case.K * 2
    result.update(timing, cold_tbps=nbytes / timing["cold_us"] / 1e6, warm_tbps=nbytes / timing["warm_us"] / 1e6)
    return result


def child_main(name: str, cubin: str, seed: int) -> None:
    """Run one case and print its result as one tagged JSON line (the parent reads it)."""
    try:
        case = case_by_name(name)
        runner = run_layout_case if isinstance(case, LayoutCase) else run_rate_case
        result = runner(case, cubin, seed)
    except Exception as e:  # noqa: BLE001 - any failure is this case's answer, reported to the parent
        import traceback

        result = {"status": "error", "error": f"{type(e).__name__}: {e}"[:600],
                  "traceback": traceback.format_exc()[-1500:]}
    print(RESULT_TAG + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------- the parent (per case)

def classify_child(returncode: int | None, stdout: str, stderr: str, timed_out: bool) -> dict:
    """The case's result from what its subprocess left: its tagged line if it printed one, else a crash
    (the process died, e.g. on a sticky fault) or a hang (it ran past the timeout)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = (stderr or stdout or "").strip()[-1500:]
    if timed_out:
        return {"status": "hung", "error": "the case's process ran past its timeout and was killed", "stderr": tail}
    return {"status": "crashed", "error": f"the case's process exited with code {returncode} and no result",
            "stderr": tail}


def run_case_isolated(case, cubin: str, seed: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.tma_flat_probe", "--child", case.name, "--cubin", cubin,
           "--seed", str(seed)]
    repo_root = Path(__file__).resolve().parent.parent
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=repo_root)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return classify_child(None, out, err, timed_out=True)
    return classify_child(proc.returncode, proc.stdout, proc.stderr, timed_out=False)


def write_json_atomic(path: Path, obj: dict) -> None:
    """Whole-file replace, so a probe killed mid-run leaves the last complete JSON, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def run_cases(cases: list, run_one, out_path: Path, header: dict) -> dict:
    """Run each case with run_one(case, seed) -> result and rewrite the JSON after every case."""
    result = {**header, "planned": [c.name for c in cases], "cases": []}
    write_json_atomic(out_path, result)
    for case in cases:
        seed = secrets.randbits(63)
        outcome = run_one(case, seed)
        entry = {**describe(case), "seed": seed, **outcome}
        result["cases"].append(entry)
        write_json_atomic(out_path, result)
        print(summary_line(entry), flush=True)
    return result


def summary_line(e: dict) -> str:
    detail = {
        "ok": lambda: (f"cold {e['cold_tbps']:.2f} TB/s, L2-warm {e['warm_tbps']:.2f} TB/s"
                       if "warm_tbps" in e else f"zero_fill_ok={e.get('zero_fill_ok')}"),
        "wrong_data": lambda: (f"wrong tiles {e['wrong_tiles']}/{e['tiles']}" if "tiles" in e else
                               f"wrong elems {e['wrong_elems']} rows {e['wrong_rows']} "
                               f"unwritten {e['unwritten_elems']}"),
    }.get(e["status"], lambda: " ".join(e.get("why", [])) or e.get("error", ""))()
    return f"{e['name']:34s} {e['status']:14s} misaligned {e['misaligned_boxes']}/{e['boxes']}  {detail}"[:220]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="run only the cases whose name contains this text")
    ap.add_argument("--case-timeout", type=float, default=90.0, help="seconds before a case counts as hung")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cubin", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args.child, args.cubin, args.seed)
        return

    # Killed from outside (e.g. `timeout`): leave through SystemExit, so subprocess.run kills the running
    # child and the JSON keeps every finished case.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from hgemm.envinfo import environment

    cases = [c for c in all_cases() if not args.only or args.only in c.name]
    out_path = Path(args.out or os.path.join(os.environ.get("OUT", "."), "tma_flat_probe.json"))
    with tempfile.TemporaryDirectory(prefix="tma-flat-") as tmp:
        cubin = str(build(Path(tmp)))
        header = {"env": environment("events"), "statuses": list(STATUSES)}
        run_cases(cases, lambda case, seed: run_case_isolated(case, cubin, seed, args.case_timeout), out_path, header)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()

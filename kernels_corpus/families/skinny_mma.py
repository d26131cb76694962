"""Skinny HGEMM family on tensor cores (M <= 64, or N <= 64, in chunks of 16 rows): the wide operand
streamed from DRAM straight into mma.sync fragments.

The kernel is hgemm::SkinnyMma in hgemm/include/hgemm/skinny_mma.cuh. With M <= 16 the GEMM is bound
by reading B once (2*K*N bytes). The skinny family's CUDA-core kernels spend 2*M FMAs a B element,
which at M = 16 costs as much time as the stream; the mma_sync family's 16-row tiles stage B in shared
memory and split K through an fp32 workspace that is zeroed, added into with atomics and converted. Here
16-byte vectors of A and B go into registers in an order of k that the m16n8k16 atom takes as loaded
(for NN, movmatrix transposes B's), the warps of a CTA and the CTAs of a cluster share K, and the
partial sums meet in shared and distributed shared memory: no workspace, no second pass. The `swap`
variants serve N <= 16 the same way with the operands' roles exchanged (C^T = B^T A^T): A's rows are
streamed, B's N columns take the atom's 16 rows, and C is written by rows. With N a handful of columns
(a mixture-of-experts router's, a classifier head's), the tile families spend a 64-wide tile on N, and
the narrow family's CUDA-core lanes read A with 2-byte loads.

Parameters: `warps` a CTA, `t` n8 tiles a CTA (8 * t streamed rows), `unroll` the 64-k chunks whose
loads a warp issues together, `split` the CTAs of a cluster sharing one column block's K, `swap` the
roles, `loads` how rows that are not 16-byte aligned are read (K % 8, or N % 8 in NN without swap):
`elem`, guarded 2-byte loads an mma step at a time, at a fraction of the speed; `pair`, the fast
path's vectors each from the two aligned 16-byte blocks it straddles, realigned in registers; `rg` the
atoms a CTA (16 * rg rows, every fragment of the wide operand feeding each; 1 where absent). Both
layouts from one render (B's layout is a compile-time switch); correct for any shape, applicable to
M <= 64 (N <= 64 with `swap`: chunks of 16 * rg rows, each streaming the wide operand) with K past the
short-K family's range, the `pair` variants only where rows are not aligned (elsewhere they are their
`elem` twins), the `rg` > 1 ones past 16 * rg / 2 rows.

This module holds the parameter space, names, launch spec and applicability; `render(params)` returns
the candidate text (the include, the launch spec and one entry instantiating the template).
"""

from __future__ import annotations

import itertools

from hgemm.problem import NUM_SMS

from .candidate_text import header_candidate, launch_spec

HEADER = "skinny_mma.cuh"   # the header whose template the renders instantiate
KC = 64                     # k a chunk
WARPS_CHOICES = (4, 8, 16)
TILE_CHOICES = ((4, 1), (4, 2), (8, 1))   # (t, unroll): at most 8 * t * unroll B registers a lane
# Registers a thread of each (t, unroll) is planned with (min_blocks). nvcc 13.0 takes 104-123 at (4, 1),
# 140-160 at (8, 1) and 154-168 at (4, 2) in both layouts (a chunk's fragments in flight: 16 of the atom's
# rows and 8 a tile of the streamed operand each); the swap variants' NN build, which gathers B's columns
# an element at a time, 126-192, each under its variant's bound without spills.
REGISTERS = {(4, 1): 124, (4, 2): 168, (8, 1): 160}
# The pair loads hold both aligned blocks of every vector of a chunk before realigning them: 166-190
# registers at (4, 1) and up to 255 at (8, 1) in nvcc 13.0, without spills at these bounds; at (4, 2)
# they spill even at 255, so the pair variants leave it out.
REGISTERS_PAIR = {(4, 1): 184, (8, 1): 255}
SPLIT_CHOICES = (1, 2, 4)
MAX_ROWS = 16               # the atom's rows: M, or N with `swap`; grid.z walks further 16-row chunks
# Atoms a CTA (`rg`, the template's RG): 32 or 64 rows a CTA, each fragment of the wide operand feeding
# every atom, so that operand is streamed once per 16 * rg rows. Registers in nvcc 13.0 (both layouts,
# both roles, clusters of 1 and 2): 122-196 at rg 2 with (t, u) = (4, 1), 230-244 with pair loads;
# 186-255 at rg 2 with (8, 1); 186-202 at rg 4 with (4, 1) without swap. Pair loads at (8, 1) or rg 4,
# and the swap variants at rg 4, spill; the variants leave them out. The warps' partial sums must fit
# static shared memory (16 * rg rows of 8t + 8 floats a warp, at most 48 KB).
ROW_GROUP_REGISTERS = {(2, 4, "elem"): 200, (2, 4, "pair"): 248, (2, 8, "elem"): 255, (4, 4, "elem"): 208}
STATIC_SMEM = 48 * 1024    # bytes of static shared memory a CTA may declare
# The rows it is worth timing on: past 16, every chunk streams the wide operand again, yet tuned on 62
# shapes with 17-64 rows it won 38, and on 23 held-out such shapes the library with that tune went
# 0.829x -> 0.975x the strongest baseline (benchmarks/skinny_rows/, H100).
APPLICABLE_ROWS = 64
MIN_K = 17                  # K <= 16 is the short-K family's


LOADS = ("elem", "pair")


def variants() -> list[dict]:
    out = []
    for loads, swap, warps, (t, unroll), split in itertools.product(LOADS, (False, True), WARPS_CHOICES, TILE_CHOICES,
                                                                   SPLIT_CHOICES):
        p = dict(kind="skinny_mma", warps=warps, t=t, unroll=unroll, split=split, swap=swap)
        p |= {"loads": "pair"} if loads == "pair" else {}  # the elem variants' names and texts as they were
        if (loads == "elem" or (t, unroll) in REGISTERS_PAIR) and min_blocks(p):
            out.append(p)
    for (rg, t, loads), swap, warps, split in itertools.product(ROW_GROUP_REGISTERS, (False, True), WARPS_CHOICES,
                                                                SPLIT_CHOICES):
        p = dict(kind="skinny_mma", warps=warps, t=t, unroll=1, split=split, swap=swap, rg=rg)
        p |= {"loads": "pair"} if loads == "pair" else {}
        if not (rg == 4 and swap) and warps * 16 * rg * (8 * t + 8) * 4 <= STATIC_SMEM and min_blocks(p):
            out.append(p)
    return out


def row_groups(p: dict) -> int:
    """Atoms of 16 rows a CTA (1 but for the `_r2` and `_r4` variants)."""
    return p.get("rg", 1)


def name(p: dict) -> str:
    return (f"skinny_mma_w{p['warps']}_t{p['t']}_u{p['unroll']}_s{p['split']}"
            + (f"_r{row_groups(p)}" if row_groups(p) > 1 else "") + ("_swap" if p.get("swap") else "")
            + ("_pair" if p.get("loads") == "pair" else ""))


def aligned_rows(p: dict, problem) -> bool:
    """Whether the kernel's vector-loaded rows are 16-byte aligned on the problem (K % 8 == 0, and for NN
    without swap N % 8 == 0): its fast path, the same for either `loads`."""
    return problem.K % 8 == 0 and (p.get("swap") or problem.layout == "TN" or problem.N % 8 == 0)


def roles(p: dict, problem) -> tuple[int, int]:
    """(the atom's rows, the streamed rows) of the product: (M, N), or (N, M) for a swap variant."""
    return (problem.N, problem.M) if p.get("swap") else (problem.M, problem.N)


def registers(p: dict) -> int:
    """Registers a thread takes (REGISTERS or REGISTERS_PAIR by t and unroll; ROW_GROUP_REGISTERS)."""
    if row_groups(p) > 1:
        return ROW_GROUP_REGISTERS[(row_groups(p), p["t"], p.get("loads", "elem"))]
    return (REGISTERS_PAIR if p.get("loads") == "pair" else REGISTERS)[(p["t"], p["unroll"])]


def min_blocks(p: dict) -> int:
    """CTAs an SM for __launch_bounds__: the most whose threads each keep `registers`, at most 2048
    threads an SM; 0 where one CTA does not fit."""
    threads = 32 * p["warps"]
    return min(65536 // (threads * registers(p)), 2048 // threads)


def column_blocks(p: dict, problem) -> int:
    """CTAs' blocks of 8 * t streamed rows (B's columns, or A's rows with swap), each reading all of X."""
    return _cdiv(roles(p, problem)[1], 8 * p["t"])


def ctas(p: dict, problem) -> int:
    return p["split"] * column_blocks(p, problem) * problem.batch * row_chunks(p, problem)


def row_chunks(p: dict, problem) -> int:
    """The CTAs' chunks of the atom's role (16 * rg rows each), each streaming the wide operand."""
    return _cdiv(roles(p, problem)[0], MAX_ROWS * row_groups(p))


def waits(p: dict, problem) -> int:
    """The loads the busiest SM waits for in sequence: waves of min_blocks CTAs an SM, times a warp's
    rounds of `unroll` chunks (the tune's estimate and the cost model's latency term)."""
    workers = p["warps"] * p["split"]
    rounds = _cdiv(_cdiv(_cdiv(problem.K, KC), workers), p["unroll"])
    return _cdiv(ctas(p, problem), NUM_SMS * min_blocks(p)) * rounds


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def applicable(p: dict, problem) -> bool:
    rows = roles(p, problem)[0]
    fits = rows <= APPLICABLE_ROWS and problem.K >= MIN_K
    # more atoms a CTA only where there are more rows than half of them fill
    fits = fits and (row_groups(p) == 1 or rows > MAX_ROWS * row_groups(p) // 2)
    return fits and (p.get("loads") != "pair" or not aligned_rows(p, problem))


def spec_text(p: dict) -> str:
    rows, wide = ("N", "M") if p.get("swap") else ("M", "N")
    return launch_spec(name(p), 32 * p["warps"],
                       f"{p['split']} * cdiv({wide}, {8 * p['t']}), 1, batch * cdiv({rows}, {MAX_ROWS * row_groups(p)})")


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating hgemm::SkinnyMma
    (hgemm/include/hgemm/skinny_mma.cuh)."""
    rows, wide, what = ("N", "A", "rows") if p.get("swap") else ("M", "B", "columns")
    rg = row_groups(p)
    desc = (f"// Skinny HGEMM ({rows} <= 16) on tensor cores: " if rg == 1 else
            f"// Skinny HGEMM ({rows} in chunks of {16 * rg}) on tensor cores, {rg} atoms a CTA: ")
    desc += (f"{wide} streamed into mma fragments, {8 * p['t']} {what} "
             f"a CTA, K shared by {p['warps']} warps x {p['split']} CTAs of a cluster, {p['unroll']} chunks in flight")
    if p.get("loads") == "pair":
        desc += ", unaligned rows read as realigned pairs of 16-byte loads"
    # the template's trailing arguments, as few as its defaults allow (the 1-atom texts as they were)
    swap, loads = ("true" if p.get("swap") else "false"), p.get("loads", "elem")
    if rg > 1:
        tail = f", {swap}, hgemm::MisalignedLoads::{loads}, {rg}"
    elif loads == "pair":
        tail = f", {swap}, hgemm::MisalignedLoads::pair"
    else:
        tail = ", true" if p.get("swap") else ""
    return header_candidate(desc, HEADER, spec_text(p), name(p), 32 * p["warps"], min_blocks(p),
                            f"hgemm::SkinnyMma<{p['warps']}, {p['t']}, {p['unroll']}, {p['split']}{tail}>",
                            cluster=p["split"])

"""Short-K HGEMM family on tensor cores (16 < K <= 64): C streamed in aligned 16-byte stores.

The kernel is hgemm::SmallKMma in hgemm/include/hgemm/small_k_mma.cuh. With K this short a GEMM is
still bound by writing C, but its 2*K flops an element are more than CUDA cores keep up with (the
short-K family, small_k.py, stops at K = 16), and the tile families store an odd-N C element by
element and pay a pipeline's prologue for one or two k steps. Here a CTA's 64 columns of B sit in
registers as mma.sync fragments, ordered so that each lane ends with 8 consecutive columns of a row;
each warp walks groups of 16 rows whose starts share one offset mod 8, so every chunk inside a row
is one aligned 16-byte store, for any N and any C address. KMAX bounds K (the fragments B takes), U is
the row groups a step whose loads of A go out together. Both layouts from one render; no workspace;
correct for any shape (past KMAX a slow path), applicable at the smallest KMAX that holds K.

This module holds the parameter space, names, launch spec and applicability; `render(params)` returns
the candidate text (the include, the launch spec and one entry instantiating the template).
"""

from __future__ import annotations

import itertools

from hgemm.problem import NUM_SMS

from .candidate_text import header_candidate, launch_spec

HEADER = "small_k_mma.cuh"   # the header whose template the renders instantiate
NT = 256
WARPS = NT // 32
BN = 64                      # columns a CTA: 8 n8 tiles
KMAX_CHOICES = (32, 64)
U_CHOICES = (1, 2, 4)
MIN_K = 17                   # K <= 16 is the short-K family's (CUDA cores)
# Registers a thread takes with nvcc 13.0 in both layouts without spilling, by (KMAX, U): B's fragments
# (2 a tile and k16 step: 32 or 64), U row groups of A (KMAX / 8 a row, two rows a lane), 32
# accumulators. At 128 (two CTAs an SM) only (32, 1) compiles without spills.
REGISTERS = {(32, 1): 128, (32, 2): 136, (32, 4): 176, (64, 1): 136, (64, 2): 180, (64, 4): 255}


def variants() -> list[dict]:
    return [dict(kind="small_k_mma", kmax=kmax, u=u) for kmax, u in itertools.product(KMAX_CHOICES, U_CHOICES)]


def name(p: dict) -> str:
    return f"small_k_mma_k{p['kmax']}_u{p['u']}"


def min_blocks(p: dict) -> int:
    """CTAs an SM for __launch_bounds__: the most whose threads keep REGISTERS each."""
    return max(1, 65536 // (NT * REGISTERS[(p["kmax"], p["u"])]))


def column_blocks(p: dict, N: int) -> int:
    """grid.x: blocks of 64 columns, one chunk more than N needs (a row's first aligned column is up to
    7 in)."""
    return _cdiv(N + 8, BN)


def row_ctas(p: dict, problem) -> int:
    """grid.y: CTAs sharing a batch entry's rows, as many as one wave of min_blocks CTAs an SM holds
    over the column blocks and the batch (at least 1), and no more than the 128-row steps M needs
    (8 warps x 16 rows). Rounded down, as the short-K family's (a second wave of a few CTAs walks as
    many rows as the first)."""
    wave = NUM_SMS * min_blocks(p) // (column_blocks(p, problem.N) * problem.batch)
    return max(1, min(_cdiv(problem.M, 16 * WARPS), wave))


def ctas(p: dict, problem) -> int:
    return column_blocks(p, problem.N) * row_ctas(p, problem) * problem.batch


def steps(p: dict, problem) -> int:
    """Steps a warp takes in sequence: its U row groups' loads of A, their mmas and their stores."""
    return _cdiv(_cdiv(problem.M, 16 * WARPS * row_ctas(p, problem)), p["u"])


def waits(p: dict, problem) -> int:
    """The steps the busiest SM takes in sequence: waves of min_blocks CTAs an SM, times a warp's steps
    (the tune's estimate and the cost model's latency term)."""
    return _cdiv(ctas(p, problem), NUM_SMS * min_blocks(p)) * steps(p, problem)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def applicable(p: dict, problem) -> bool:
    # the smallest KMAX that holds K: a larger one adds only mmas on zeros and registers
    return MIN_K <= problem.K <= p["kmax"] and p["kmax"] == min(k for k in KMAX_CHOICES if k >= problem.K)


def spec_text(p: dict) -> str:
    blocks = f"cdiv(N + 8, {BN})"   # column_blocks
    rows = f"max(1, min(cdiv(M, {16 * WARPS}), num_sms * {min_blocks(p)} // ({blocks} * batch)))"   # row_ctas
    return launch_spec(name(p), NT, f"{blocks}, {rows}, batch")


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating hgemm::SmallKMma
    (hgemm/include/hgemm/small_k_mma.cuh)."""
    desc = (f"// Short-K HGEMM on tensor cores (K <= {p['kmax']}): B's fragments in registers, 16-row groups "
            f"of A through m16n8k16, 8 columns of C a lane in one aligned store, {p['u']} groups a step")
    return header_candidate(desc, HEADER, spec_text(p), name(p), NT, min_blocks(p),
                            f"hgemm::SmallKMma<{p['kmax']}, {p['u']}>")

"""Narrow HGEMM family (N <= 16, or TN with M <= 16): one operand read once or twice against one that
fits in shared memory.

The kernel is hgemm::Narrow in hgemm/include/hgemm/narrow.cuh. With a handful of output columns the
tile families spend a 64- or 128-wide tile on N and, on odd row pitches, load A through their
element-wise or register-realigned paths; here lanes walk A's rows along k with 2-byte loads, so any
pitch and alignment reads at full width, and B (N x K, at most 16 columns) is staged in shared memory
as fp32. NB columns a k (the smallest power of two >= N, or half of it), LPR lanes a row, R rows a
lane, KW warps sharing a row's k for problems with few rows and a long K. Both layouts from one
render (B's layout is a compile-time switch); no workspace. Correct for any N (grid.y walks blocks of
NB columns, each reading A again), applicable where N <= 16. TN is symmetric in A and B (both row-major over k), so the
`swap` variants serve a few rows instead (M <= 16): B's rows are walked, A is staged, C is written
transposed; they render for TN alone.

This module holds the parameter space, names, launch spec and applicability; `render(params)` returns
the candidate text (the include, the launch spec and one entry instantiating the template).
"""

from __future__ import annotations

import itertools

from hgemm.problem import NUM_SMS

from .candidate_text import header_candidate, launch_spec

HEADER = "narrow.cuh"   # the header whose template the renders instantiate
NT = 256
WARPS = NT // 32
NB_CHOICES = (1, 2, 4, 8, 16)
LPR_CHOICES = (8, 32)       # lanes a row: 8 for short rows, 32 (a whole warp) for long ones
R_CHOICES = (1, 2, 4)       # rows a lane, R * NB <= 32 accumulators a thread (114 registers at most)
KW_CHOICES = (1, 8)         # warps a row: 8 spreads few rows' k over the CTA
MAX_ACCUMULATORS = 32

SHORT_ROWS = 1024           # K up to this may take 8 lanes a row
FEW_ROWS = 2048             # M * batch up to this may split a row's k over the CTA's warps


def variants() -> list[dict]:
    few_columns = [dict(kind="narrow", nb=nb, lpr=lpr, r=r, kw=kw, swap=False)
                   for nb, lpr, r, kw in itertools.product(NB_CHOICES, LPR_CHOICES, R_CHOICES, KW_CHOICES)
                   if r * nb <= MAX_ACCUMULATORS]
    # a few rows (TN): B's N rows are many where this pays, so no warps share a row's k
    few_rows = [dict(kind="narrow", nb=nb, lpr=lpr, r=r, kw=1, swap=True)
                for nb, lpr, r in itertools.product(NB_CHOICES, LPR_CHOICES, R_CHOICES) if r * nb <= MAX_ACCUMULATORS]
    return few_columns + few_rows


def name(p: dict) -> str:
    return f"narrow_nb{p['nb']}_l{p['lpr']}_r{p['r']}_w{p['kw']}" + ("_swap" if p["swap"] else "")


def roles(p: dict, problem) -> tuple[int, int]:
    """(walked rows, staged columns) of the product: (M, N), or (N, M) for a swap variant."""
    return (problem.N, problem.M) if p["swap"] else (problem.M, problem.N)


def rows_per_cta(p: dict) -> int:
    return WARPS // p["kw"] * (32 // p["lpr"]) * p["r"]


def ctas(p: dict, problem) -> int:
    """The launch's CTAs: blocks of walked rows times blocks of NB staged columns (each block of columns
    walking the rows again), times the batch."""
    rows, cols = roles(p, problem)
    return _cdiv(rows, rows_per_cta(p)) * _cdiv(cols, p["nb"]) * problem.batch


def min_blocks(p: dict) -> int:
    """CTAs an SM for __launch_bounds__: 4 (64 registers a thread) for up to 4 accumulators, else 2
    (128). A thread holds a chunk's 32 staged values, or its lane's loads in flight, beside its
    accumulators: at 64 registers, ptxas spills variants of 8 accumulators."""
    return 4 if p["r"] * p["nb"] <= 4 else 2


def unroll(p: dict) -> int:
    """Loads a lane issues before using them (the template's U): 16 or 32 a thread, its R rows' share,
    as the registers of min_blocks allow. A 2-byte load each, so the bytes in flight, and not the
    bandwidth, bound a walk: 1,024 threads an SM with 16 loads each are 32 KB in flight an SM."""
    return (16 if min_blocks(p) == 4 else 32) // p["r"]


def waits(p: dict, problem) -> int:
    """The memory waits the busiest SM takes in sequence: waves of min_blocks CTAs an SM, times a lane's
    round trips (the tune's estimate and the cost model's latency term)."""
    return _cdiv(ctas(p, problem), NUM_SMS * min_blocks(p)) * round_trips(p, problem.K)


def round_trips(p: dict, K: int) -> int:
    """The memory latencies a lane waits out in sequence over a walked row of K: per staged chunk of
    8192 / NB k, one for the staging and one a batch of unroll(p) steps (the template's UNROLL)."""
    kc, step = 8192 // p["nb"], p["kw"] * p["lpr"]
    batch = min(unroll(p), max(1, kc // step))
    chunks = [kc] * (K // kc) + ([K % kc] if K % kc else [])
    return sum(1 + _cdiv(_cdiv(kn, step), batch) for kn in chunks)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def smem_bytes(p: dict) -> int:
    """The template's SMEM_BYTES: a 32-KB fp32 chunk of B, and the KW warps' partial sums."""
    red = p["kw"] * rows_per_cta(p) * p["nb"] if p["kw"] > 1 else 0
    return (8192 + red) * 4


def applicable(p: dict, problem) -> bool:
    if p["swap"] and problem.layout != "TN":
        return False
    rows, cols = roles(p, problem)
    if cols > 16:
        return False
    # the smallest NB that holds the staged columns (a wider one only adds zeros), or half of it: two
    # column blocks read the walked operand twice, but a lane reads half the staged values a k and
    # twice the CTAs share the walk. On 768x7x5312, NB 4 took 18.9 us and the fastest NB 8 22.3
    # (benchmarks/narrow/expected.json); on 12672x15x64 TN, NB 8 19.7 and NB 16 14.4: the tune times both.
    fit = min(nb for nb in NB_CHOICES if nb >= cols)
    if p["nb"] not in (fit, fit // 2):
        return False
    if p["lpr"] == 8 and problem.K > SHORT_ROWS:
        return False
    # swapped, the walked rows are B's N: with fewer CTAs than SMs (13 x 64 x 1024 TN: 8) the walk
    # holds too few bytes in flight, and a tile family is faster (benchmarks/narrow/)
    if p["swap"] and _cdiv(rows, rows_per_cta(p)) * problem.batch < NUM_SMS:
        return False
    return p["kw"] == 1 or (rows * problem.batch <= FEW_ROWS and problem.K >= 256)


def spec_text(p: dict) -> str:
    grid = f"cdiv({'N' if p['swap'] else 'M'}, {rows_per_cta(p)}), cdiv({'M' if p['swap'] else 'N'}, {p['nb']}), batch"
    return launch_spec(name(p), NT, grid, smem_bytes(p), layouts="TN" if p["swap"] else "NN, TN")


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating hgemm::Narrow
    (hgemm/include/hgemm/narrow.cuh)."""
    split = f", {p['kw']} warps sharing a row's k" if p["kw"] > 1 else ""
    if p["swap"]:
        desc = (f"// Narrow HGEMM, TN, M <= {p['nb']}: A staged in shared memory, {p['lpr']} lanes a row of B, "
                f"{p['r']} rows a lane, C written transposed")
    else:
        desc = (f"// Narrow-N HGEMM (N <= {p['nb']}): B staged in shared memory, {p['lpr']} lanes a row of A, "
                f"{p['r']} rows a lane{split}")
    swap = "true" if p["swap"] else "false"
    return header_candidate(desc, HEADER, spec_text(p), name(p), NT, min_blocks(p),
                            f"hgemm::Narrow<{p['nb']}, {p['lpr']}, {p['r']}, {p['kw']}, {swap}, {unroll(p)}>")

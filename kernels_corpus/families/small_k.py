"""Short-K HGEMM family (K <= 16): C written at full width whatever N, one aligned vector store a lane.

The kernel is hgemm::SmallK in hgemm/include/hgemm/small_k.cuh. With K this short a GEMM is bound by
writing C (2*M*N bytes against 2*(M + N)*K read, 2*K flops an element), and the tile families, whose
rows start wherever N puts them, store an odd-N C element by element. Here each warp walks rows that
share one offset mod V, so every lane's V columns go out as one aligned 2V-byte store; B's V x K values a
lane sit in registers (fp32), a row of A is one broadcast load a k. KMAX bounds K (the registers B
takes: KMAX * V), V is the columns a lane (8 or 4), U the rows a step whose loads go out together. Both
layouts from one render (B's layout is a compile-time switch); no workspace; correct for any M, N, K
and batch (past KMAX a slow path), applicable at the smallest KMAX that holds K.

This module holds the parameter space, names, launch spec and applicability; `render(params)` returns
the candidate text (the include, the launch spec and one entry instantiating the template).
"""

from __future__ import annotations

import itertools

from hgemm.problem import NUM_SMS

from .candidate_text import header_candidate, launch_spec

HEADER = "small_k.cuh"   # the header whose template the renders instantiate
NT = 256
WARPS = NT // 32
KMAX_CHOICES = (4, 8, 16)
V_CHOICES = (4, 8)          # columns a lane: 8-byte or 16-byte stores
U_CHOICES = (1, 2, 4)       # rows a step
MAX_A_VALUES = 32           # U * KMAX: A's values a lane holds a step


def variants() -> list[dict]:
    return [dict(kind="small_k", kmax=kmax, v=v, u=u)
            for kmax, v, u in itertools.product(KMAX_CHOICES, V_CHOICES, U_CHOICES) if u * kmax <= MAX_A_VALUES]


def name(p: dict) -> str:
    return f"small_k_k{p['kmax']}_v{p['v']}_u{p['u']}"


def min_blocks(p: dict) -> int:
    """CTAs an SM for __launch_bounds__, from the registers a thread holds: B's KMAX x V values, U rows of
    A, V sums and ~12 for addresses and indices. 4 (64 registers) where they fit, else 2 (128), else 1:
    with nvcc 13.0 the most of each variant that compiles without spills in both layouts."""
    regs = p["kmax"] * p["v"] + p["u"] * p["kmax"] + p["v"] + 12
    return 4 if regs <= 64 else 2 if regs <= 128 else 1


def column_blocks(p: dict, N: int) -> int:
    """grid.x: blocks of 32 lanes x V columns, one chunk more than N needs (a row's first aligned column
    is up to V - 1 in)."""
    return _cdiv(N + p["v"], 32 * p["v"])


def row_ctas(p: dict, problem) -> int:
    """grid.y: CTAs sharing a batch entry's rows, as many as one wave of min_blocks CTAs an SM holds
    over the column blocks and the batch (at least 1), and no fewer than 8 * U rows each. Rounded down:
    a second wave of a few CTAs walks as many rows as the first, and doubled the time on
    4089 x 9017 x 3 (540 CTAs of 4 an SM: benchmarks/small_k/)."""
    wave = NUM_SMS * min_blocks(p) // (column_blocks(p, problem.N) * problem.batch)
    return max(1, min(_cdiv(problem.M, WARPS * p["u"]), wave))


def ctas(p: dict, problem) -> int:
    return column_blocks(p, problem.N) * row_ctas(p, problem) * problem.batch


def steps(p: dict, problem) -> int:
    """Steps a warp takes in sequence: its U rows' loads of A, their sums and their stores."""
    return _cdiv(_cdiv(problem.M, WARPS * row_ctas(p, problem)), p["u"])


def waits(p: dict, problem) -> int:
    """The steps the busiest SM takes in sequence: waves of min_blocks CTAs an SM, times a warp's steps
    (the tune's estimate and the cost model's latency term)."""
    return _cdiv(ctas(p, problem), NUM_SMS * min_blocks(p)) * steps(p, problem)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def applicable(p: dict, problem) -> bool:
    # the smallest KMAX that holds K: a larger one adds only FMAs on zeros and registers
    return problem.K <= p["kmax"] and p["kmax"] == min(k for k in KMAX_CHOICES if k >= problem.K)


def spec_text(p: dict) -> str:
    v, u, mb = p["v"], p["u"], min_blocks(p)
    blocks = f"cdiv(N + {v}, {32 * v})"   # column_blocks
    rows = f"max(1, min(cdiv(M, {WARPS * u}), num_sms * {mb} // ({blocks} * batch)))"   # row_ctas
    return launch_spec(name(p), NT, f"{blocks}, {rows}, batch")


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating hgemm::SmallK
    (hgemm/include/hgemm/small_k.cuh)."""
    desc = (f"// Short-K HGEMM (K <= {p['kmax']}): {p['v']} columns of C a lane in one aligned store, "
            f"B in registers, {p['u']} rows of A a step")
    return header_candidate(desc, HEADER, spec_text(p), name(p), NT, min_blocks(p),
                            f"hgemm::SmallK<{p['kmax']}, {p['v']}, {p['u']}>")

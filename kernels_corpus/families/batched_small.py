"""Batched-small HGEMM family: many 64..1024-sized GEMMs in one launch on tensor cores.

The kernel is the mma_sync family's template, hgemm::MmaSyncGemm (hgemm/include/hgemm/mma_sync_gemm.cuh:
cp.async ring, swizzled smem, ldmatrix, m16n8k16, zero-filled edges, a run-time path for misaligned
rows, here with element loads) with grid = (tiles per matrix, 1, batch): every (tile, batch) pair
is an independent CTA, so batch supplies the parallelism that one small matrix cannot. What differs
is the tile menu: small CTA tiles (32..128) with 2..4 warps and 2..3 stages, so that a 128x128x128
problem still yields 4..16 CTAs per matrix, K loops of only 2..16 steps waste little on pipeline
fill, and several CTAs share an SM (low smem, <= 168 registers) to hide latency by occupancy.
Split-K is never used: batch already fills the GPU.
"""

from __future__ import annotations

import itertools

from . import mma_sync

HEADER = mma_sync.HEADER   # the renders are mma_sync's

# (BM, BN, BK, WARPS_M, WARPS_N, MIN_BLOCKS); MIN_BLOCKS as in mma_sync (largest spill-free value).
TILES = [
    (32, 64, 32, 1, 2, 4),
    (64, 32, 32, 2, 1, 4),
    (64, 64, 32, 2, 2, 3),
    (64, 64, 64, 2, 2, 2),
    (128, 64, 32, 2, 2, 2),
    (64, 128, 32, 2, 2, 3),
]
STAGES = (2, 3)


def variants() -> list[dict]:
    out = []
    for (bm, bn, bk, wm, wn, mb), st in itertools.product(TILES, STAGES):
        p = dict(prefix="batched_small", bm=bm, bn=bn, bk=bk, warps_m=wm, warps_n=wn, min_blocks=mb,
                 stages=st, split_k=1, group_m=8)
        if mma_sync._valid(p):
            out.append(p)
    return out


def name(p: dict) -> str:
    return mma_sync.name(p)


def applicable(p: dict, problem) -> bool:
    """Batch > 1 and every matrix small: at least ~2 CTAs per SM in total, no tile larger than the matrix."""
    if problem.batch < 2 or max(problem.M, problem.N) > 1024:
        return False
    ctas = -(-problem.M // p["bm"]) * -(-problem.N // p["bn"]) * problem.batch
    return ctas >= 132 and p["bm"] <= max(32, 2 * problem.M) and p["bn"] <= max(32, 2 * problem.N)


def render(p: dict) -> str:
    return mma_sync.render(p)

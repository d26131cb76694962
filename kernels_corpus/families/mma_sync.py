"""Tensor-core mma.sync HGEMM family (sm_80+; compiled for sm_90a).

The kernel is hgemm::MmaSyncGemm in hgemm/include/hgemm/mma_sync_gemm.cuh: a BM x BN tile per CTA, a
STAGES-deep cp.async ring of swizzled shared-memory tiles, ldmatrix fragments and m16n8k16 mma.sync,
any M, N, K without padding copies (zero-filled edges, a run-time path for rows that are not 16-byte
aligned), split-K over grid.y through a zero-filled fp32 workspace and a per-tile counter.

This module holds the parameter space: `variants()` enumerates parameter dicts that compile without
spills; `render(params)` returns the candidate text (the include, the launch spec and one entry
instantiating the template); `applicable(params, problem)` is a cheap pre-filter for the tuner.
"""

from __future__ import annotations

import functools
import itertools

from .candidate_text import header_candidate

HEADER = "mma_sync_gemm.cuh"   # the header whose template the renders instantiate
SMEM_LIMIT = 227 * 1024

# (BM, BN, BK, WARPS_M, WARPS_N, MIN_BLOCKS). Warp tiles of 32..64 x 32..64 give each warp enough
# mma work per ldmatrix. MIN_BLOCKS is the CTAs-per-SM promise to ptxas (__launch_bounds__), which caps
# registers at 64K / (MIN_BLOCKS * threads); the values are the largest that ptxas 13.0 compiles
# without spills for both layouts (8-warp 128x128: 128 regs, 2 CTAs/SM; 128 accumulators: 1 CTA/SM).
TILES = [
    (128, 128, 32, 2, 4, 2),
    (128, 256, 32, 2, 4, 1),
    (256, 128, 32, 4, 2, 1),
    (128, 64, 32, 2, 2, 2),
    (64, 128, 32, 2, 2, 3),
    (64, 128, 64, 2, 2, 2),
    (64, 64, 64, 2, 2, 2),
    (64, 64, 32, 2, 2, 3),
    # Skinny M (<= 32) with split-K: one warp row, B streamed through the ring at bandwidth.
    (16, 128, 64, 1, 4, 3),
    (32, 128, 64, 1, 4, 2),
    # Small outputs (a few hundred rows and columns, often odd pitches): four warps of 16 x 16, so such a
    # shape runs 2-4 times the CTAs of the 16 x 128 or 64 x 64 tiles, split by K where it is long.
    # On ten such shapes (benchmarks/small_tiles/) 1.13-1.42x the family's 16 x 128 and 64 x 64 tiles and
    # 1.085x the strongest baseline in geomean (worst 0.93, 143 x 704 x 305 TN), where cuBLAS runs 32 x 32
    # tiles too; 32 x 64 and k tiles of 32 were slower on every one.
    (32, 32, 64, 2, 2, 4),
]
SMALL_TILE = (32, 32, 64, 2, 2, 4)   # hgemm.tune.small_tile_siblings times it beside larger tiles
# (tile, stages) pairs where the table's MIN_BLOCKS spilled a few bytes with ptxas 13.0: one CTA fewer.
SPILL_FALLBACK = {(128, 128, 32, 2, 4, 2), (128, 128, 32, 2, 4, 4)}
STAGES = (2, 3, 4)
SPLIT_K = (1, 2, 4, 8, 16)
GROUP_M = (8,)


def _smem_bytes(p: dict) -> int:
    return p["stages"] * (p["bm"] * p["bk"] + p["bk"] * p["bn"]) * 2


def _acc_regs(p: dict) -> int:
    return (p["bm"] // p["warps_m"]) * (p["bn"] // p["warps_n"]) // 32


def _min_blocks(p: dict) -> int:
    want = p["min_blocks"]
    if (p["bm"], p["bn"], p["bk"], p["warps_m"], p["warps_n"], p["stages"]) in SPILL_FALLBACK:
        want -= 1
    while want > 1 and want * _smem_bytes(p) > SMEM_LIMIT:
        want -= 1
    return max(1, want)


def _valid(p: dict) -> bool:
    bm, bn, bk, wm, wn = p["bm"], p["bn"], p["bk"], p["warps_m"], p["warps_n"]
    nt = 32 * wm * wn
    wtm, wtn = bm // wm, bn // wn
    return (
        bm % wm == 0 and bn % wn == 0 and wtm % 16 == 0 and wtn % 16 == 0
        and bk in (32, 64)
        and (bm * bk // 8) % nt == 0 and (bk * bn // 8) % nt == 0
        and _smem_bytes(p) <= SMEM_LIMIT
        and _acc_regs(p) <= 128
    )


def variants() -> list[dict]:
    out = []
    for (bm, bn, bk, wm, wn, mb), st, sk, g in itertools.product(TILES, STAGES, SPLIT_K, GROUP_M):
        p = dict(bm=bm, bn=bn, bk=bk, warps_m=wm, warps_n=wn, min_blocks=mb, stages=st, split_k=sk, group_m=g,
                 misaligned_loads="pair")
        # Split-K pays off only when the tile grid is small, i.e. for the smaller tiles.
        if sk > 1 and bm * bn > 128 * 128:
            continue
        if sk == 16 and bm > 32:   # 16-way splits only for the skinny tiles
            continue
        if _valid(p):
            out.append(p)
    return out


def name(p: dict) -> str:
    return (f"{p.get('prefix', 'mma_sync')}_{p['bm']}x{p['bn']}x{p['bk']}_w{p['warps_m']}x{p['warps_n']}"
            f"_s{p['stages']}_g{p['group_m']}_sk{p['split_k']}" + ("_mp" if _pair_loads(p) else ""))


def _pair_loads(p: dict) -> bool:
    # misaligned rows: 2 aligned 16-byte loads + realignment per chunk ("pair"), or 8 element loads
    # ("elem"). On the 11 misaligned default-grid shapes pair is faster in geomean for each of the 4
    # tilings timed (1.09-1.33x), so variants() uses it; aligned rows take the cp.async path either way.
    return p.get("misaligned_loads", "elem") == "pair"


def small_sibling(p: dict) -> dict | None:
    """The SMALL_TILE variant at p's ring and split of K; None where p has that tile or the family lists
    no such variant. hgemm.tune.small_tile_siblings times it beside the first mma.sync kernel of a
    shortlist on small outputs."""
    bm, bn, bk, wm, wn, mb = SMALL_TILE
    if (p["bm"], p["bn"], p["bk"]) == (bm, bn, bk):
        return None
    q = dict(p, bm=bm, bn=bn, bk=bk, warps_m=wm, warps_n=wn, min_blocks=mb)
    return q if q in _small_tile_variants() else None


@functools.lru_cache(maxsize=1)
def _small_tile_variants() -> tuple[dict, ...]:
    # the search and the tune ask once a shortlisted kernel; the variants are fixed
    bm, bn, bk = SMALL_TILE[:3]
    return tuple(v for v in variants() if (v["bm"], v["bn"], v["bk"]) == (bm, bn, bk))


def applicable(p: dict, problem) -> bool:
    """Heuristic pre-filter: split-K only when the tile grid underfills 132 SMs, as deep as one k tile a
    split: on a small output a deeper split keeps more SMs busy, and the tune measures which depth pays
    (benchmarks/deep_split/)."""
    tiles = -(-problem.M // p["bm"]) * -(-problem.N // p["bn"]) * problem.batch
    if p["split_k"] > 1:
        return tiles < 132 and problem.K >= p["bk"] * p["split_k"] and problem.M * problem.N * problem.batch <= 1 << 26
    # Huge tiles on tiny problems waste most of the CTA.
    return p["bm"] * p["bn"] <= 64 * 64 * 4 or tiles >= 66


def spec_text(p: dict) -> str:
    nt = 32 * p["warps_m"] * p["warps_n"]
    tiles = f"cdiv(M, {p['bm']}) * cdiv(N, {p['bn']})"
    if p["split_k"] > 1:
        grid = f"{tiles}, min({p['split_k']}, cdiv(K, {p['bk']})), batch"
        workspace = f"batch * M * N * 4 + batch * {tiles} * 4"
    else:
        grid = f"{tiles}, 1, batch"
        workspace = "0"
    return "\n".join([
        "/*@launch",
        f"entry: {name(p)}",
        f"block: {nt}",
        f"grid: {grid}",
        f"smem: {_smem_bytes(p)}",
        f"workspace: {workspace}",
        # the CTA that reduces a split tile clears its partial sums and counter (hgemm/mma_sync_gemm.cuh)
        *(["workspace_zero: kept"] if p["split_k"] > 1 else []),
        "layouts: NN, TN",
        "@*/",
    ])


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating
    hgemm::MmaSyncGemm (hgemm/include/hgemm/mma_sync_gemm.cuh)."""
    loads = "pair" if _pair_loads(p) else "elem"
    split = f", split-K up to {p['split_k']}" if p["split_k"] > 1 else ""
    tile = (f"hgemm::MmaSyncTile<{p['bm']}, {p['bn']}, {p['bk']}, {p['warps_m']}, {p['warps_n']}, {p['stages']}, "
            f"{p['group_m']}, hgemm::MisalignedLoads::{loads}>")
    comment = (f"// mma.sync HGEMM: {p['bm']}x{p['bn']}x{p['bk']} CTA tile (BM x BN x BK), {p['warps_m']}x{p['warps_n']} "
               f"warps, {p['stages']}-stage cp.async ring, grouped rasterisation (GROUP_M {p['group_m']}){split}")
    return header_candidate(comment, HEADER, spec_text(p), name(p), 32 * p["warps_m"] * p["warps_n"], _min_blocks(p),
                            f"hgemm::MmaSyncGemm<{tile}>")

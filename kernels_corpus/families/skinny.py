"""Skinny-M HGEMM family (M <= 8 per CTA chunk): GEMV-like kernels that stream B from HBM.

The kernels are hgemm::SkinnyNN and hgemm::SkinnyTN in hgemm/include/hgemm/skinny.cuh. With M this
small the GEMM is a matrix-vector product bound by reading B once (2*K*N bytes); the fp32 CUDA-core
work stays under the FP32 ceiling for M <= 8. For 16 <= M <= 64 the mma_sync family's 16x128 / 32x128
split-K tiles use tensor cores instead. NN: a thread owns 8 consecutive columns and MT rows of C, KG
k-groups per CTA meet in shared memory; TN: a warp owns NPW columns and reduces with shuffles. Both
split K over grid.y when the tile grid alone would underfill the GPU (fp32 workspace atomics, the
last CTA per tile converts).

This module holds the parameter space, names, launch spec and applicability; `render(params)` returns
the candidate text (the include, the launch spec and one entry instantiating the template).
"""

from __future__ import annotations

import itertools

from .candidate_text import header_candidate, launch_spec

HEADER = "skinny.cuh"   # the header whose template the renders instantiate
NT = 256
MT_CHOICES = (1, 2, 4, 8)
NN_BN = (256, 512)          # columns per CTA: TPN = BN / 8 threads across n, KG = 256 / TPN k-groups
NN_UNROLL = (4, 8)          # 16-byte B loads in flight a thread (MT=8, whose 64 accumulators need the registers: 2)
TN_NPW = (2, 4)             # output columns per warp
SPLITS = (1, 4, 16)


def variants() -> list[dict]:
    out = []
    for mt, bn, sk in itertools.product(MT_CHOICES, NN_BN, SPLITS):
        for unroll in (NN_UNROLL if mt <= 4 else (2,)):
            out.append(dict(kind="nn", mt=mt, bn=bn, split_k=sk, unroll=unroll))
    for mt, npw, sk in itertools.product(MT_CHOICES, TN_NPW, SPLITS):
        out.append(dict(kind="tn", mt=mt, npw=npw, split_k=sk))
    return out


def name(p: dict) -> str:
    if p["kind"] == "nn":   # the first depth of NN_UNROLL (or MT=8's 2) unnamed
        return f"skinny_nn_m{p['mt']}_bn{p['bn']}_sk{p['split_k']}" + ("_u8" if p['unroll'] == 8 else "")
    return f"skinny_tn_m{p['mt']}_npw{p['npw']}_sk{p['split_k']}"


def applicable(p: dict, problem) -> bool:
    if problem.layout.lower() != p["kind"] or problem.M > 64:
        return False
    # Each CTA chunk re-reads B: only worth it when M needs at most a couple of chunks.
    if -(-problem.M // p["mt"]) > 2:
        return False
    ctas = (-(-problem.N // p["bn"]) if p["kind"] == "nn" else -(-problem.N // (8 * p["npw"]))) * problem.batch
    return p["split_k"] == 1 or ctas < 264


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
        ksplit = f"min({p['split_k']}, cdiv(K, {kg * p['unroll']}))"
    else:
        tiles_x = f"cdiv(N, {8 * p['npw']})"
        ksplit = f"min({p['split_k']}, cdiv(K, 256))"
    workspace = "0"
    if p["split_k"] > 1:
        workspace = f"batch * M * N * 4 + batch * {mchunks} * {tiles_x} * 4"
    # the CTA that reduces a split tile clears its partial sums and counter (hgemm/skinny.cuh)
    return launch_spec(name(p), NT, f"{tiles_x}, {ksplit}, batch * {mchunks}", _smem(p), workspace, p["kind"].upper(),
                       kept_zero=p["split_k"] > 1)


def render(p: dict) -> str:
    """The candidate: the header include, the launch spec and an entry instantiating hgemm::SkinnyNN or
    hgemm::SkinnyTN (hgemm/include/hgemm/skinny.cuh)."""
    split = f", split-K up to {p['split_k']}" if p["split_k"] > 1 else ""
    if p["kind"] == "nn":
        kernel = f"hgemm::SkinnyNN<{p['mt']}, {p['bn']}, {p['unroll']}>"
        desc = (f"// Skinny-M HGEMM, NN: {p['mt']} rows of C x {p['bn']} columns per CTA, {p['unroll']} 16-byte B loads "
                f"in flight per thread, k-groups reduced in shared memory{split}")
    else:
        kernel = f"hgemm::SkinnyTN<{p['mt']}, {p['npw']}>"
        desc = f"// Skinny-M HGEMM, TN: {p['mt']} rows of C, {p['npw']} columns per warp, warp-shuffle reduction{split}"
    return header_candidate(desc, HEADER, spec_text(p), name(p), NT, _min_blocks(p), kernel)

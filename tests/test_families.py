"""Seed kernel families: every variant renders to a valid candidate; a sample compiles without spills.

The fragment-mapping test emulates, in numpy, the mma_sync kernel's swizzled smem layout, its
ldmatrix lane addressing and the m16n8k16 fragment layouts (PTX ISA), mirroring the index formulas
of hgemm/include/hgemm/common.cuh (swizzle_offset) and mma_sync_gemm.cuh (FragOffsets), so a wrong
lane or swizzle formula fails here on a CPU.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import ROOT
from hgemm import sass
from hgemm.candidate import INCLUDE_DIR, parse_candidate
from hgemm.compile import compile_candidate
from hgemm.problem import Problem, load_grid
from hgemm.tune import CLUSTER_CTAS_AT_ONCE
from kernels_corpus import families
from kernels_corpus.families import batched_small, mma_sync, narrow, skinny, skinny_mma, small_k, small_k_mma, wgmma

FAMILY_MODULES = (mma_sync, skinny, batched_small, wgmma, narrow, small_k, skinny_mma, small_k_mma)
HEADER_FAMILIES = (mma_sync, skinny, batched_small, narrow, small_k, skinny_mma, small_k_mma)   # renders that instantiate a header template
EDGE_PROBLEMS = [
    Problem(1, 1, 1), Problem(1, 4096, 4096), Problem(17, 31, 7, batch=3), Problem(4097, 4095, 8193),
    Problem(128, 128, 128, batch=256), Problem(16384, 16384, 16384), Problem(64, 14336, 4096, layout="TN"),
]


@pytest.mark.parametrize("fam", FAMILY_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_family_renders_and_parses(fam):
    vs = fam.variants()
    assert vs, "family has no variants"
    names = [fam.name(p) for p in vs]
    assert len(set(names)) == len(names), "variant names must be unique"
    for p in vs:
        text = fam.render(p)
        cand = parse_candidate(text)
        assert cand.spec.entry == fam.name(p)
        # (an attribute may stand before `void`: the wgmma family's __cluster_dims__)
        assert re.search(r'extern "C" __global__ (?:\w+(?:\([^)]*\))? )?void __launch_bounds__\([^)]*\)\s*'
                         + cand.spec.entry + r"\(", text)
        for prob in EDGE_PROBLEMS:
            env = dict(prob.variables(), num_sms=132)
            grid, block, smem, ws = cand.spec.launch_dims(env)   # raises on an out-of-range grid
            assert smem <= 227 * 1024
            assert ws >= 0
            fam.applicable(p, prob)                               # a hint, but must not raise


def test_every_family_kernel_with_a_workspace_keeps_it_zero():
    # the split-K reductions clear what they read and the staged grid barrier resets its counters
    # (hgemm/common.cuh, hgemm/staged_loader.cuh), so no launch pays a fill: every render that asks for a
    # workspace says so, and one that asks for none says nothing
    kept = 0
    for fam in FAMILY_MODULES:
        for p in fam.variants():
            spec = parse_candidate(fam.render(p)).spec
            has_workspace = spec.workspace.constant() != 0
            assert spec.zero_each_launch != has_workspace, (fam.name(p), spec.workspace.text)
            kept += has_workspace
    assert kept > 100  # split mma_sync and skinny kernels, staged wgmma ones


def test_the_workspace_fill_experiment_pins_one_kernel_two_ways(tmp_path):
    """benchmarks/workspace_fill.py: per shape the same kernel text, once as rendered (filled once) and
    once without `workspace_zero: kept` (filled before every launch), pinned as exact entries."""
    from benchmarks.workspace_fill import main
    from hgemm.library import Library

    assert main([str(ROOT / "benchmarks/search_headroom/tune"), "--out", str(tmp_path)]) == 0
    problems = load_grid(tmp_path / "grid.yaml")
    once, each = Library(tmp_path / "fill_once"), Library(tmp_path / "fill_each")
    assert len(problems) >= 10
    for p in problems:
        a, b = once.lookup(p), each.lookup(p)
        assert a.how == b.how == "exact" and a.name == b.name
        assert not a.candidate.spec.zero_each_launch and b.candidate.spec.zero_each_launch
        assert a.candidate.source.replace("workspace_zero: kept\n", "") == b.candidate.source


def test_the_skinny_rows_experiment_times_every_variant_beside_the_librarys_choice(tmp_path):
    """benchmarks/skinny_rows.py: the held-out shapes with 17 to 64 rows in a role, every skinny_mma
    variant, and the library's kernel for each shape in the same folder, named in library.json."""
    import json

    from benchmarks.skinny_rows import main
    from hgemm.library import merge_libraries

    merge_libraries([ROOT / "benchmarks/tune", ROOT / "benchmarks/sample_tune"], tmp_path / "lib")
    assert main([str(ROOT / "configs/grids/heldout.yaml"), "--library", str(tmp_path / "lib"),
                 "--out", str(tmp_path / "out")]) == 0
    problems = load_grid(tmp_path / "out/grid.yaml")
    assert problems and all(17 <= p.M <= 64 or 17 <= p.N <= 64 for p in problems)
    names = {f.stem for f in (tmp_path / "out/kernels").glob("*.cu")}
    assert {skinny_mma.name(v) for v in skinny_mma.variants()} <= names
    picks = json.loads((tmp_path / "out/library.json").read_text())["choices"]
    assert set(picks) == {p.key for p in problems} and set(picks.values()) <= names


@pytest.mark.parametrize("fam", HEADER_FAMILIES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_header_family_renders_are_an_include_a_spec_and_one_entry(fam):
    """The kernel lives in the headers: a render is a comment line, the include, the spec and an entry
    (in clusters, for some) whose body is one statement instantiating a template."""
    for p in fam.variants():
        text = fam.render(p)
        spec = text[text.index("/*@launch"):text.index("@*/") + 3]
        code = [line for line in text.replace(spec, "").splitlines() if line.strip()]
        assert code[0].startswith("// ") and code[1] == f"#include <hgemm/{fam.HEADER}>", code
        assert len(code) == 7 and re.match(r'extern "C" __global__ (__cluster_dims__\(\d, 1, 1\) )?void __launch_bounds__\(',
                                           code[2]), code
        assert code[-1] == "}" and code[-2].startswith("  hgemm::") and code[-2].endswith("::run(A, B, C, M, N, K, batch, workspace);")
        assert "__device__" not in text and "asm" not in text and text.count("__global__") == 1


def test_all_and_sample_variants_are_deterministic():
    allv = families.all_variants()
    assert len(allv) == sum(len(m.variants()) for m in FAMILY_MODULES)
    a, b = families.sample_variants(7, seed=3), families.sample_variants(7, seed=3)
    assert a == b and len(a) == 7
    assert families.sample_variants(10**6, seed=0) == sorted(allv, key=lambda nv: [n for n, _ in allv].index(nv[0]))


def test_skinny_applicability():
    p = dict(kind="nn", mt=4, bn=256, split_k=1)
    assert skinny.applicable(p, Problem(1, 4096, 4096))
    assert not skinny.applicable(p, Problem(128, 4096, 4096))
    assert not skinny.applicable(p, Problem(1, 4096, 4096, layout="TN"))


def test_mma_sync_splits_k_as_deep_as_a_k_tile_a_split_on_small_outputs():
    deep = next(p for p in mma_sync.variants() if (p["bm"], p["bn"], p["bk"], p["split_k"]) == (16, 128, 64, 16))
    assert mma_sync.applicable(deep, Problem(128, 81, 1745))       # 28 k tiles over 16 splits: 128 CTAs
    assert not mma_sync.applicable(deep, Problem(128, 81, 900))    # 15 k tiles: a split would hold none
    assert not mma_sync.applicable(deep, Problem(2048, 2048, 8192))  # 2048 tiles fill the SMs unsplit
    spec = parse_candidate(mma_sync.render(deep)).spec
    grid, _, _, _ = spec.launch_dims(dict(Problem(128, 81, 1745).variables(), num_sms=132))
    assert grid == (8, 16, 1)


def test_narrow_applicability():
    four = dict(kind="narrow", nb=4, lpr=32, r=2, kw=1, swap=False)
    assert narrow.applicable(four, Problem(9856, 3, 1263, layout="TN"))
    assert not narrow.applicable(four, Problem(9856, 2, 1263))          # N = 2 takes NB 2 (or 1)
    assert narrow.applicable(four, Problem(768, 7, 5312))              # half of N = 7's NB 8: two column blocks
    assert not narrow.applicable(dict(four, nb=2), Problem(768, 7, 5312))   # a quarter: four
    assert not narrow.applicable(four, Problem(9856, 17, 1263))         # past 16 columns: the tile families
    assert not narrow.applicable(dict(four, lpr=8), Problem(9856, 3, 1263))   # 8 lanes a row: short rows only
    assert narrow.applicable(dict(four, kw=8), Problem(64, 3, 4687))    # few rows, long K: the CTA shares k
    assert not narrow.applicable(dict(four, kw=8), Problem(9856, 3, 4687))
    few_rows = dict(four, swap=True)                                    # TN with a few rows: the roles swap
    assert narrow.applicable(few_rows, Problem(3, 9856, 1263, layout="TN"))
    assert not narrow.applicable(few_rows, Problem(3, 9856, 1263))      # NN's B is K x N: not row-major over k
    assert not narrow.applicable(few_rows, Problem(9856, 3, 1263, layout="TN"))
    # 16 of B's rows a CTA: 64 rows are 4 CTAs, 33 batches of them fill the 132 SMs
    assert not narrow.applicable(few_rows, Problem(3, 64, 1263, layout="TN"))
    assert narrow.applicable(few_rows, Problem(3, 64, 1263, batch=33, layout="TN"))
    assert parse_candidate(narrow.render(few_rows)).spec.layouts == ("TN",)


def _narrow_model(p: dict, layout: str, M: int, N: int, K: int, batch: int, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """hgemm::Narrow::run (hgemm/include/hgemm/narrow.cuh) line by line over flat buffers, one CTA and
    thread at a time, in the kernel's own index formulas: the batch offsets, the staged chunk's source
    addresses and zeros, the batches of unrolled k steps (the last one guarded), the butterfly, the KW warps' sums and the store
    address (transposed for swap). Every global and shared access is bounds-checked, a shared value is
    never read before it is written, and every element of C is asserted stored once."""
    nb, lpr, r_, kw, swap = p["nb"], p["lpr"], p["r"], p["kw"], p["swap"]
    groups, rows_cta = 32 // lpr, narrow.rows_per_cta(p)
    kc_size, step = 8192 // nb, kw * lpr
    unroll = min(narrow.unroll(p), max(1, kc_size // step))
    red = kw * rows_cta * nb if kw > 1 else 0
    assert (kc_size * nb + red) * 4 == narrow.smem_bytes(p)
    a_flat, b_flat = A.ravel(), B.ravel()
    c_flat, stores = np.full(batch * M * N, np.nan), np.zeros(batch * M * N, dtype=int)

    def load(buf, i):
        assert 0 <= i < buf.size, f"read {i} of {buf.size}"
        return buf[i]

    rows, cols = (N, M) if swap else (M, N)
    walked, staged = (b_flat, a_flat) if swap else (a_flat, b_flat)
    for bz, by, bx in itertools.product(range(batch), range(-(-cols // nb)), range(-(-rows // rows_cta))):
        a_off, b_off = bz * M * K, bz * K * N
        walked_off, staged_off = (b_off, a_off) if swap else (a_off, b_off)
        n0 = by * nb
        nn = min(nb, cols - n0)
        smem = np.full(kc_size * nb + red, np.nan)
        threads = []
        for t in range(256):
            lane, warp = t & 31, t >> 5
            local0 = (warp // kw * groups + lane // lpr) * r_
            row0 = bx * rows_cta + local0
            threads.append({"kw": warp % kw, "lg": lane % lpr, "local0": local0, "row0": row0,
                            "arow": [walked_off + min(row0 + r, rows - 1) * K for r in range(r_)],
                            "acc": np.zeros((r_, nb))})
        for kc in range(0, K, kc_size):
            kn = min(kc_size, K - kc)
            written = set()
            for t in range(256):
                for j in range(kc_size // 256):   # a thread's share of the chunk; past the block's columns zeros
                    k = t + j * 256
                    if k >= kn:
                        continue
                    for n in range(nb):
                        src = (kc + k) * cols + n0 + n if layout == "NN" else (n0 + n) * K + kc + k
                        assert k * nb + n not in written
                        written.add(k * nb + n)
                        smem[k * nb + n] = load(staged, staged_off + src) if n < nn else 0.0
            for th in threads:
                def fma(k):
                    assert 0 <= k < kn and not np.isnan(smem[k * nb:k * nb + nb]).any()
                    for r in range(r_):
                        th["acc"][r] += load(walked, th["arow"][r] + kc + k) * smem[k * nb:k * nb + nb]
                for k0 in range(th["kw"] * lpr + th["lg"], kn, step * unroll):   # the last batch guarded
                    for u in range(unroll):
                        if k0 + u * step < kn:
                            fma(k0 + u * step)
        for w in range(8):   # the xor butterfly over each group's LPR lanes
            accs = np.stack([threads[w * 32 + lane]["acc"] for lane in range(32)])
            o = lpr // 2
            while o:
                accs = accs + accs[[lane ^ o for lane in range(32)]]
                o //= 2
            for lane in range(32):
                threads[w * 32 + lane]["acc"] = accs[lane]

        def store(row, col, v):
            i = bz * M * N + (col * rows + row if swap else row * cols + col)
            assert bz * M * N <= i < (bz + 1) * M * N
            c_flat[i] = v
            stores[i] += 1

        for th in threads:
            for r, n in itertools.product(range(r_), range(nb)):
                if (r * nb + n) % lpr != th["lg"]:
                    continue
                if kw == 1 and n < nn and th["row0"] + r < rows:
                    store(th["row0"] + r, n0 + n, th["acc"][r][n])
                elif kw > 1:
                    smem[kc_size * nb + (th["kw"] * rows_cta + th["local0"] + r) * nb + n] = th["acc"][r][n]
        if kw > 1:
            for i in range(rows_cta * nb):
                lr, n = divmod(i, nb)
                if n < nn and bx * rows_cta + lr < rows:
                    sums = [smem[kc_size * nb + (w * rows_cta + lr) * nb + n] for w in range(kw)]
                    assert not np.isnan(sums).any()
                    store(bx * rows_cta + lr, n0 + n, sum(sums))
    assert (stores == 1).all()
    return c_flat.reshape(batch, M, N)


@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("params,shape", [
    # a partial last CTA, batch, one guarded batch of steps (16 steps of 32 lanes cover 512 > 485)
    (dict(kind="narrow", nb=4, lpr=32, r=2, kw=1, swap=False), (37, 3, 485, 2)),
    # two whole batches of 16 steps of 8 lanes, then a guarded one with 5 k left
    (dict(kind="narrow", nb=2, lpr=8, r=1, kw=1, swap=False), (33, 2, 2 * 16 * 8 + 5, 1)),
    (dict(kind="narrow", nb=1, lpr=8, r=4, kw=1, swap=False), (45, 1, 19, 1)),     # 4 rows a warp of 8-lane groups
    (dict(kind="narrow", nb=8, lpr=32, r=1, kw=8, swap=False), (5, 7, 1100, 1)),   # the CTA's warps share k, two chunks
    (dict(kind="narrow", nb=2, lpr=32, r=1, kw=1, swap=False), (9, 2, 4097 + 3, 1)),  # B staged in two chunks
    (dict(kind="narrow", nb=4, lpr=8, r=1, kw=8, swap=False), (3, 11, 40, 2)),     # past NB columns: three blocks
    (dict(kind="narrow", nb=16, lpr=8, r=2, kw=1, swap=False), (20, 16, 1, 3)),    # K = 1
    (dict(kind="narrow", nb=4, lpr=32, r=2, kw=1, swap=True), (3, 37, 300, 2)),    # a few rows: B walked, C transposed
    (dict(kind="narrow", nb=2, lpr=8, r=4, kw=1, swap=True), (5, 40, 19, 1)),      # and past NB rows: three blocks
])
def test_narrow_index_arithmetic_covers_each_product_once(params, shape, layout):
    if params["swap"] and layout == "NN":
        pytest.skip("the swap variants are TN only")
    M, N, K, batch = shape
    rng = np.random.default_rng(0)
    A = rng.integers(-3, 4, (batch, M, K)).astype(np.float64)   # small integers: the sums are exact
    B = rng.integers(-3, 4, (batch, K, N) if layout == "NN" else (batch, N, K)).astype(np.float64)
    C = _narrow_model(params, layout, M, N, K, batch, A, B)
    np.testing.assert_array_equal(C, A @ (B if layout == "NN" else B.transpose(0, 2, 1)))


def test_small_k_applies_at_the_smallest_kmax_that_holds_k():
    def kmaxes(K):
        return sorted({p["kmax"] for p in small_k.variants() if small_k.applicable(p, Problem(4089, 9017, K))})
    assert kmaxes(1) == kmaxes(4) == [4] and kmaxes(5) == kmaxes(8) == [8] and kmaxes(9) == kmaxes(16) == [16]
    assert kmaxes(17) == []
    # 6 variants a K up to 8 (two store widths x three rows a step), 4 at K 16 (U * K <= 32 values of A)
    assert [sum(small_k.applicable(p, Problem(64, 64, k)) for p in small_k.variants()) for k in (3, 7, 16)] == [6, 6, 4]


def _small_k_model(p: dict, layout: str, M: int, N: int, K: int, batch: int, A: np.ndarray, B: np.ndarray,
                   c_elem: int) -> np.ndarray:
    """hgemm::SmallK::run (hgemm/include/hgemm/small_k.cuh) over flat buffers, a warp and lane at a time,
    in the kernel's own index formulas, on the grid its launch spec gives: C starts c_elem elements
    into an aligned allocation. Every load is bounds-checked, every whole-vector store asserted aligned to
    V elements of the allocation, and every element of C asserted stored once."""
    kmax, v, u = p["kmax"], p["v"], p["u"]
    grid, block, _, _ = parse_candidate(small_k.render(p)).spec.launch_dims(
        dict(M=M, N=N, K=K, batch=batch, num_sms=132))
    assert block == (256, 1, 1) and grid[2] == batch
    a_flat, b_flat = A.ravel(), B.ravel()
    c_flat, stores = np.full(batch * M * N, np.nan), np.zeros(batch * M * N, dtype=int)
    whole_stores = 0

    def load(buf, i):
        assert 0 <= i < buf.size, f"read {i} of {buf.size}"
        return buf[i]

    for bz, by, bx, warp, lane in itertools.product(range(grid[2]), range(grid[1]), range(grid[0]), range(8), range(32)):
        a_off, b_off, c_off = bz * M * K, bz * K * N, bz * M * N
        phase = (c_elem + (bz * M + warp) * N) % v
        c0 = (v - phase) % v
        cs = c0 - v + v * (bx * 32 + lane)
        whole = cs >= 0 and cs + v <= N
        bv = np.zeros((kmax, v))
        for k, j in itertools.product(range(kmax), range(v)):
            col = cs + j
            if k < K and 0 <= col < N:
                bv[k, j] = load(b_flat, b_off + (k * N + col if layout == "NN" else col * K + k))
        step = 8 * grid[1]
        for r0 in range(warp + 8 * by, M, step * u):
            rows = [r0 + i * step for i in range(u)]
            a = np.array([[load(a_flat, a_off + r * K + k) if k < K and r < M else 0.0 for k in range(kmax)]
                          for r in rows])
            for i, r in enumerate(rows):
                if r >= M:
                    break
                acc = a[i] @ bv
                for j in range(v):
                    if whole or 0 <= cs + j < N:
                        assert 0 <= cs + j < N
                        c_flat[c_off + r * N + cs + j] = acc[j]
                        stores[c_off + r * N + cs + j] += 1
                if whole:
                    assert (c_elem + c_off + r * N + cs) % v == 0, "a vector store off its alignment"
                    whole_stores += 1
    assert (stores == 1).all()
    return c_flat.reshape(batch, M, N), whole_stores


@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("params,shape,c_elem", [
    (dict(kind="small_k", kmax=4, v=8, u=2), (37, 301, 3, 2), 0),     # odd N: every row at another offset mod 8
    (dict(kind="small_k", kmax=4, v=4, u=4), (19, 259, 1, 3), 3),     # C starting off its alignment, batch
    (dict(kind="small_k", kmax=8, v=8, u=1), (9, 5, 7, 2), 0),        # N < V: chunks straddle two rows' ends
    (dict(kind="small_k", kmax=16, v=8, u=2), (70, 520, 16, 1), 5),   # two column blocks, several row CTAs
    (dict(kind="small_k", kmax=16, v=4, u=1), (1, 1, 9, 1), 0),       # one element
])
def test_small_k_index_arithmetic_covers_each_element_once_with_aligned_vectors(params, shape, layout, c_elem):
    M, N, K, batch = shape
    rng = np.random.default_rng(0)
    A = rng.integers(-3, 4, (batch, M, K)).astype(np.float64)   # small integers: the sums are exact
    B = rng.integers(-3, 4, (batch, K, N) if layout == "NN" else (batch, N, K)).astype(np.float64)
    C, whole = _small_k_model(params, layout, M, N, K, batch, A, B, c_elem)
    np.testing.assert_array_equal(C, A @ (B if layout == "NN" else B.transpose(0, 2, 1)))
    # the vector stores carry all but each row's two straddling chunks
    assert N < 2 * params["v"] or whole >= batch * M * (N // params["v"] - 1)


def _skinny_mma_column(layout: str, t: int, c: int) -> int:
    """SkinnyMma::column: the CTA column that column c of n8 tile t stands for."""
    return 8 * t + c if layout == "TN" else 32 * (t // 4) + 8 * (c // 2) + 2 * (t % 4) + c % 2


def _skinny_mma_model(p: dict, layout: str, M: int, N: int, K: int, batch: int, A: np.ndarray, B: np.ndarray,
                      vec: bool) -> tuple[np.ndarray, np.ndarray]:
    """hgemm::SkinnyMma::run (hgemm/include/hgemm/skinny_mma.cuh) in its own index formulas, on the grid its
    launch spec gives, a warp's 32 lanes at a time: the registers each lane loads (the k order of the
    fragment slots; for NN the movmatrix transpose), the m16n8k16 atom per the PTX fragment layouts, the
    partial sums by column(), the cluster's reduction and the stores. The product is D = X . Y^T: X = A
    and Y = B, or with `swap` X = B's columns, Y = A's rows and D = C^T. Every load is bounds-checked.
    Returns C and how many times each element was stored."""
    warps, T, U, split, swap = p["warps"], p["t"], p["unroll"], p["split"], p.get("swap", False)
    RG = p.get("rg", 1)   # atoms a CTA: 16 * RG rows, every fragment of Y feeding each
    grid, block, _, _ = parse_candidate(skinny_mma.render(p)).spec.launch_dims(
        dict(M=M, N=N, K=K, batch=batch, num_sms=132))
    assert block == (32 * warps, 1, 1) and grid[0] % split == 0 and grid[1] == 1
    y_rows = swap or layout == "TN"   # Y's rows along k: vectors as loaded (else NN's movmatrix path)
    R, W = (N, M) if swap else (M, N)
    BN, workers, chunks = 8 * T, warps * split, -(-K // 64)
    uu = U if vec else 1
    lanes = np.arange(32)
    g, q = lanes // 4, lanes % 4
    C = np.full((batch, M, N), np.nan)
    stores = np.zeros((batch, M, N), dtype=int)

    def read(mat, rows_idx, cols_idx, ok):
        rows_idx, cols_idx = np.broadcast_arrays(rows_idx, cols_idx)
        assert (~ok | ((rows_idx < mat.shape[0]) & (cols_idx < mat.shape[1]))).all(), "a read out of range"
        return np.where(ok, mat[np.minimum(rows_idx, mat.shape[0] - 1), np.minimum(cols_idx, mat.shape[1] - 1)], 0.0)

    def load(x_mat, y_mat, rows, n0, k0):
        # a[lane, i, r, w, e]: atom i's row 16i + g + 8r, k = k0 + 16q + 8v + 2w' + e with w = 4v + w'
        w_idx, e_idx = np.meshgrid(np.arange(8), np.arange(2), indexing="ij")
        a = np.zeros((32, RG, 2, 8, 2))
        for i, r in itertools.product(range(RG), range(2)):
            m = (16 * i + g + 8 * r)[:, None, None]
            k = k0 + 16 * q[:, None, None] + 2 * w_idx + e_idx
            a[:, i, r] = read(x_mat, m, k, (m < rows) & (k < K))
        b = np.zeros((32, T, 8, 2))
        if y_rows:
            for t in range(T):
                n = (n0 + 8 * t + g)[:, None, None]
                k = k0 + 16 * q[:, None, None] + 2 * w_idx + e_idx
                b[:, t] = read(y_mat, n, k, (n < W) & (k < K))
        else:
            for w in range(8):
                s_, p_ = divmod(w, 2)
                kr = k0 + 16 * (g // 2) + 4 * s_ + 2 * p_ + g % 2
                for h in range(T // 4):
                    j_idx, e2 = np.meshgrid(np.arange(4), np.arange(2), indexing="ij")
                    n = n0 + 32 * h + 8 * q[:, None, None] + 2 * j_idx + e2
                    raw = read(y_mat.T, kr[:, None, None], n, (kr[:, None, None] < K) & (n < W))   # [lane, j, e]
                    # movmatrix.trans: lane (g, q) gets element e of source row 2q + e, column g, which
                    # lane (2q + e) * 4 + g // 2 holds as element g % 2
                    for j in range(4):
                        for e in range(2):
                            b[:, 4 * h + j, w, e] = raw[(2 * q + e) * 4 + g // 2, j, g % 2]
        return a, b

    def mma(acc, a, b):
        for s_, ai in itertools.product(range(4), range(RG)):
            a_l = np.zeros((16, 16))
            for e in range(2):   # a0..a3 of the PTX m16n8k16 row-major A layout
                a_l[g, 2 * q + e] = a[:, ai, 0, 2 * s_, e]
                a_l[g + 8, 2 * q + e] = a[:, ai, 1, 2 * s_, e]
                a_l[g, 2 * q + 8 + e] = a[:, ai, 0, 2 * s_ + 1, e]
                a_l[g + 8, 2 * q + 8 + e] = a[:, ai, 1, 2 * s_ + 1, e]
            for t in range(T):
                b_l = np.zeros((16, 8))
                for e in range(2):   # b0, b1 of the col-major B layout
                    b_l[2 * q + e, g] = b[:, t, 2 * s_, e]
                    b_l[2 * q + 8 + e, g] = b[:, t, 2 * s_ + 1, e]
                d = a_l @ b_l
                for i in range(4):
                    acc[:, ai, t, i] += d[g + 8 * (i // 2), 2 * q + i % 2]

    for bz, bx in itertools.product(range(grid[2]), range(grid[0])):
        mchunks = -(-R // (16 * RG))
        b_, m0 = bz // mchunks, (bz % mchunks) * 16 * RG
        rows, n0 = min(16 * RG, R - m0), (bx // split) * BN
        # X's rows from the chunk's first, and Y's rows (W x K), whatever their layout in memory
        b_rows = B[b_] if layout == "TN" else B[b_].T   # N x K
        x_mat, y_mat = (b_rows[m0:], A[b_]) if swap else (A[b_, m0:], b_rows)
        if bx % split == 0:
            part = np.zeros((split, 16 * RG, BN))
        rank = bx % split
        for warp in range(warps):
            acc = np.zeros((32, RG, T, 4))
            for c in range(rank * warps + warp, chunks, workers * uu):
                for u in range(uu):
                    cu = c + u * workers
                    a, b = load(x_mat, y_mat, rows, n0, cu * 64 if cu < chunks else K)
                    if cu < chunks:
                        mma(acc, a, b)
            for ai, t, i in itertools.product(range(RG), range(T), range(4)):
                m = 16 * ai + g + 8 * (i // 2)
                col = np.array([_skinny_mma_column("TN" if y_rows else "NN", t, 2 * qq + i % 2) for qq in q])
                np.add.at(part[rank], (m[m < rows], col[m < rows]), acc[m < rows, ai, t, i])
        if rank < split - 1:
            continue
        total = part.sum(axis=0)   # every rank's sums, as each CTA reads them through DSMEM
        nt = 32 * warps
        if swap:   # element e of the CTA's share: D's column w, row m, C[n0 + w, m0 + m]
            for r, tid in itertools.product(range(split), range(nt)):
                for e in range(r * nt + tid, min(BN, W - n0) * rows, nt * split):
                    w, m = divmod(e, rows)
                    C[b_, n0 + w, m0 + m] = total[m, w]
                    stores[b_, n0 + w, m0 + m] += 1
            continue
        vectors = rows * (BN // 8)
        for r, tid in itertools.product(range(split), range(nt)):
            for v in range(r * nt + tid, vectors, nt * split):
                m, c0 = divmod(v, BN // 8)
                for e in range(8):
                    if n0 + 8 * c0 + e < N:
                        C[b_, m0 + m, n0 + 8 * c0 + e] = total[m, 8 * c0 + e]
                        stores[b_, m0 + m, n0 + 8 * c0 + e] += 1
    return C, stores


@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("params,shape", [
    (dict(warps=4, t=4, unroll=1, split=1), (16, 64, 128, 1)),     # whole chunks, one column block
    (dict(warps=4, t=4, unroll=2, split=2), (13, 100, 200, 1)),    # a K tail, N past the last block, M < 16
    (dict(warps=4, t=8, unroll=1, split=4), (1, 70, 1000, 2)),     # M = 1, batch, K shared by 16 workers
    (dict(warps=8, t=4, unroll=2, split=1), (37, 33, 77, 1)),      # M past one 16-row chunk
    (dict(warps=4, t=4, unroll=1, split=2), (5, 8, 17, 3)),        # fewer chunks than workers
    (dict(warps=4, t=4, unroll=1, split=1, swap=True), (64, 16, 128, 1)),    # N = 16: whole chunks, one block
    (dict(warps=4, t=4, unroll=2, split=2, swap=True), (100, 3, 200, 1)),    # N = 3: a K tail, M past a block
    (dict(warps=4, t=8, unroll=1, split=4, swap=True), (70, 1, 1000, 2)),    # N = 1, batch, 16 workers
    (dict(warps=8, t=4, unroll=2, split=1, swap=True), (33, 37, 77, 1)),     # N past one 16-row chunk
    (dict(warps=4, t=4, unroll=1, split=2, loads="pair"), (13, 101, 203, 2)),   # realigned rows: odd K and N
    (dict(warps=4, t=8, unroll=1, split=1, swap=True, loads="pair"), (99, 7, 333, 1)),
    (dict(warps=4, t=4, unroll=1, split=2, rg=2), (37, 33, 77, 2)),   # two atoms a CTA: a full and a partial chunk
    (dict(warps=4, t=4, unroll=1, split=1, rg=4), (64, 40, 130, 1)),  # four atoms, one chunk of 64 rows
    (dict(warps=4, t=4, unroll=1, split=1, rg=4), (19, 40, 70, 1)),   # four atoms, three of them past the rows
    (dict(warps=8, t=4, unroll=1, split=2, swap=True, rg=2), (70, 45, 100, 1)),  # N = 45 in chunks of 32
    (dict(warps=4, t=4, unroll=1, split=1, rg=2, loads="pair"), (33, 101, 203, 1)),
])
@pytest.mark.parametrize("vec", [True, False])
def test_skinny_mma_fragment_order_computes_a_times_b(params, shape, layout, vec):
    """The k order of the fragment slots pairs X's and Y's values of the same k, NN's movmatrix puts each
    column where column() says, the swap variants write D^T into C, and every element of C is stored once
    (the fast path's whole-vector loads and the realigned path read the same elements: one chunk at a
    time there)."""
    M, N, K, batch = shape
    p = dict(kind="skinny_mma", **params)
    rng = np.random.default_rng(1)
    A = rng.integers(-3, 4, (batch, M, K)).astype(np.float64)   # small integers: the sums are exact
    B = rng.integers(-3, 4, (batch, K, N) if layout == "NN" else (batch, N, K)).astype(np.float64)
    C, stores = _skinny_mma_model(p, layout, M, N, K, batch, A, B, vec)
    assert (stores == 1).all()
    np.testing.assert_array_equal(C, A @ (B if layout == "NN" else B.transpose(0, 2, 1)))


def _small_k_mma_model(p: dict, layout: str, M: int, N: int, K: int, batch: int, A: np.ndarray, B: np.ndarray,
                       c_elem: int) -> tuple[np.ndarray, int]:
    """hgemm::SmallKMma::run (hgemm/include/hgemm/small_k_mma.cuh) in its own index formulas, on the grid its
    launch spec gives, a warp's 32 lanes at a time: the warp's phase and columns, B's fragments in slot
    order for the columns column() names, A's vectors of each row group, the m16n8k16 atom per the PTX
    fragment layouts and the stores, C starting c_elem elements into an aligned allocation. Every vector
    store is asserted aligned and every element of C stored once. Returns C, the vector stores and the
    column blocks some warp walked rows in."""
    kmax, u = p["kmax"], p["u"]
    grid, block, _, _ = parse_candidate(small_k_mma.render(p)).spec.launch_dims(
        dict(M=M, N=N, K=K, batch=batch, num_sms=132))
    assert block == (256, 1, 1) and grid[2] == batch
    lanes = np.arange(32)
    g, q = lanes // 4, lanes % 4
    C = np.full((batch, M, N), np.nan)
    stores = np.zeros((batch, M, N), dtype=int)
    whole, walked = 0, set()
    steps_k = kmax // 16
    s_idx, p_idx, e_idx = np.meshgrid(np.arange(steps_k), np.arange(2), np.arange(2), indexing="ij")
    for bz, by, bx, warp in itertools.product(range(grid[2]), range(grid[1]), range(grid[0]), range(8)):
        a_mat, b_mat = A[bz], B[bz]
        phase = (c_elem + (bz * M + warp) * N) % 8
        cs = 64 * bx - phase
        step, first = 8 * grid[1], warp + 8 * by
        # the CTA's shared block: bs[k][j] = B[k][block_col + j] for 72 columns, one formula for all warps
        block_col = 64 * bx - 8
        kk, jj = np.meshgrid(np.arange(kmax), np.arange(72), indexing="ij")
        cc = block_col + jj
        ok = (kk < K) & (cc >= 0) & (cc < N)
        kc, ccc = np.minimum(kk, K - 1), np.clip(cc, 0, N - 1)
        bs = np.where(ok, b_mat[kc, ccc] if layout == "NN" else b_mat[ccc, kc], 0.0)
        # bf[lane, t, s, p, e] = bs[k][off + column(t, g)], k = (kmax/4) q + 4s + 2p + e: B[k][cs + column]
        off = cs - block_col
        assert 1 <= off <= 8
        if cs >= N:  # the last column block, for rows whose phase shifts them: no work
            continue
        bf = np.zeros((32, 8, steps_k, 2, 2))
        for t in range(8):
            col = off + np.array([_skinny_mma_column("NN", t, gg) for gg in g])
            k = (kmax // 4) * q[:, None, None, None] + 4 * s_idx + 2 * p_idx + e_idx
            bf[:, t] = bs[k, np.broadcast_to(col[:, None, None, None], k.shape)]
        for r0 in range(first, M, 16 * step * u):
            walked.add(bx)
            for uu in range(u):
                base = r0 + 16 * step * uu
                rows = base + step * np.arange(16)
                # a[i, kslot]: row i of the group, lane column q's halves at (kmax/4) q + 2w + e
                a = np.zeros((16, kmax))
                for i, r in enumerate(rows):
                    if r < M:
                        a[i, :min(K, kmax)] = a_mat[r, :min(K, kmax)]
                acc = np.zeros((32, 8, 4))
                for s_ in range(steps_k):
                    a_l, b_l = np.zeros((16, 16)), np.zeros((8, 16, 8))
                    for pp, e in itertools.product(range(2), range(2)):
                        kphys = (kmax // 4) * q + 4 * s_ + 2 * pp + e   # the slot's k, for A and B alike
                        a_l[g, 2 * q + 8 * pp + e] = a[g, kphys]
                        a_l[g + 8, 2 * q + 8 * pp + e] = a[g + 8, kphys]
                        for t in range(8):
                            b_l[t, 2 * q + 8 * pp + e, g] = bf[:, t, s_, pp, e]
                    for t in range(8):
                        d = a_l @ b_l[t]
                        for i in range(4):
                            acc[:, t, i] += d[g + 8 * (i // 2), 2 * q + i % 2]
                for lane in range(32):
                    for half in range(2):
                        r = rows[g[lane] + 8 * half]
                        if r >= M:
                            continue
                        for h in range(2):
                            col = cs + 32 * h + 8 * q[lane]
                            v = [acc[lane, 4 * h + j, 2 * half + e] for j in range(4) for e in range(2)]
                            is_whole = col >= 0 and col + 8 <= N
                            if is_whole:
                                assert (c_elem + (bz * M + r) * N + col) % 8 == 0, "a vector store off its alignment"
                                whole += 1
                            for e in range(8):
                                if 0 <= col + e < N:
                                    C[bz, r, col + e] = v[e]
                                    stores[bz, r, col + e] += 1
    assert (stores == 1).all()
    return C, whole, walked


@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("params,shape,c_elem", [
    (dict(kmax=32, u=1), (37, 301, 17, 2), 0),     # odd N: every row at another offset mod 8; K just past 16
    (dict(kmax=64, u=2), (300, 70, 64, 1), 3),     # C starting off its alignment, whole K, two row CTAs' groups
    (dict(kmax=64, u=4), (19, 5, 33, 3), 0),       # N < 8: chunks straddle both row ends; batch
    (dict(kmax=32, u=2), (1, 130, 32, 1), 5),      # one row, three column blocks
    (dict(kmax=32, u=1), (40, 256, 17, 2), 0),     # every row aligned: no head chunk, the fifth block idle
])
def test_small_k_mma_fragments_and_stores_compute_a_times_b_with_aligned_vectors(params, shape, layout, c_elem):
    M, N, K, batch = shape
    p = dict(kind="small_k_mma", **params)
    rng = np.random.default_rng(2)
    A = rng.integers(-3, 4, (batch, M, K)).astype(np.float64)   # small integers: the sums are exact
    B = rng.integers(-3, 4, (batch, K, N) if layout == "NN" else (batch, N, K)).astype(np.float64)
    C, whole, walked = _small_k_mma_model(p, layout, M, N, K, batch, A, B, c_elem)
    np.testing.assert_array_equal(C, A @ (B if layout == "NN" else B.transpose(0, 2, 1)))
    # the vector stores carry all but each row's two straddling chunks, and all of it on aligned rows
    assert N < 16 or whole >= batch * M * (N // 8 - 1)
    # on aligned rows no head chunk shifts the columns: the grid's extra column block walks no rows
    assert len(walked) == -(-N // 64) or N % 8 or c_elem % 8


def test_small_k_mma_applies_at_the_smallest_kmax_that_holds_k():
    def kmaxes(K):
        return sorted({p["kmax"] for p in small_k_mma.variants() if small_k_mma.applicable(p, Problem(1419, 14848, K))})

    assert kmaxes(16) == [] and kmaxes(17) == kmaxes(32) == [32] and kmaxes(33) == kmaxes(64) == [64]
    assert kmaxes(65) == []


# ---------------------------------------------------------------- mma_sync fragment emulation

def _swz(r: int, c: int, cpr: int) -> int:
    """Byte offset of chunk c of row r (mirror of hgemm::swizzle_offset<CPR>)."""
    if cpr == 4:
        return (r * 4 + (c ^ ((r >> 1) & 3))) * 16
    return (r * cpr + (c ^ (r & 7))) * 16


def _store_tile(tile: np.ndarray) -> np.ndarray:
    rows, cols = tile.shape
    cpr = cols // 8
    smem = np.full(rows * cols, np.nan)
    for r in range(rows):
        for c in range(cpr):
            off = _swz(r, c, cpr) // 2
            assert np.isnan(smem[off:off + 8]).all(), "swizzle maps two chunks to one place"
            smem[off:off + 8] = tile[r, c * 8:c * 8 + 8]
    return smem


def _ldmatrix_x4(smem: np.ndarray, addrs: list[int], trans: bool) -> list[list[tuple[float, float]]]:
    """regs[lane][j] = the two halves lane receives from matrix j (rows addressed by lanes 8j..8j+7)."""
    mats = [np.stack([smem[addrs[8 * j + i] // 2: addrs[8 * j + i] // 2 + 8] for i in range(8)]) for j in range(4)]
    # One 8-address phase must touch 8 distinct 16-byte bank groups of a 128-byte line: no conflicts.
    for j in range(4):
        assert len({(addrs[8 * j + i] // 16) % 8 for i in range(8)}) == 8, "ldmatrix bank conflict"
    out = []
    for lane in range(32):
        g, t = lane // 4, lane % 4
        if trans:
            out.append([(m[2 * t, g], m[2 * t + 1, g]) for m in mats])
        else:
            out.append([(m[g, 2 * t], m[g, 2 * t + 1]) for m in mats])
    return out


def _mma(acc, a_regs, b_regs):
    """acc[lane] (4 floats) += A(16x16) @ B(16x8), fragments laid out as in PTX m16n8k16."""
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg, (r, k) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]):
            A[r, k:k + 2] = a_regs[lane][reg]
        for reg, k in enumerate([2 * t, 2 * t + 8]):
            B[k:k + 2, g] = b_regs[lane][reg]
    D = A @ B
    for lane in range(32):
        g, t = lane // 4, lane % 4
        acc[lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]


@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("tile", [(64, 64, 32, 2, 2), (32, 64, 64, 1, 2), (64, 128, 32, 2, 2)])
def test_mma_sync_fragment_mapping(layout, tile):
    bm, bn, bk, wmc, wnc = tile
    wtm, wtn = bm // wmc, bn // wnc
    mi_n, ni_n = wtm // 16, wtn // 8
    rng = np.random.default_rng(0)
    A = rng.integers(-3, 4, (bm, bk)).astype(float)
    B = rng.integers(-3, 4, (bk, bn)).astype(float)
    sA = _store_tile(A)
    sB = _store_tile(B.T.copy() if layout == "TN" else B)
    a_cpr, b_cpr = bk // 8, (bk // 8 if layout == "TN" else bn // 8)
    C = np.full((bm, bn), np.nan)
    for wm in range(wmc):
        for wn in range(wnc):
            acc = {(mi, ni): [np.zeros(4) for _ in range(32)] for mi in range(mi_n) for ni in range(ni_n)}
            for ks in range(bk // 16):
                # FragOffsets + compute_stage, lane by lane.
                a_frag = []
                for mi in range(mi_n):
                    addrs = [_swz(wm * wtm + (l & 15), ks * 2 + (l >> 4), a_cpr) + mi * 16 * a_cpr * 16 for l in range(32)]
                    a_frag.append(_ldmatrix_x4(sA, addrs, trans=False))
                b_frag = {}
                for nj in range(ni_n // 2):
                    if layout == "TN":
                        addrs = [_swz(wn * wtn + (l & 7) + ((l >> 4) << 3), ks * 2 + ((l >> 3) & 1), b_cpr)
                                 + nj * 16 * b_cpr * 16 for l in range(32)]
                        t = _ldmatrix_x4(sB, addrs, trans=False)
                    else:
                        addrs = [_swz((l & 7) + (((l >> 3) & 1) << 3), (wn * wtn + nj * 16) // 8 + (l >> 4), b_cpr)
                                 + ks * 16 * b_cpr * 16 for l in range(32)]
                        t = _ldmatrix_x4(sB, addrs, trans=True)
                    b_frag[2 * nj] = [[t[l][0], t[l][1]] for l in range(32)]
                    b_frag[2 * nj + 1] = [[t[l][2], t[l][3]] for l in range(32)]
                for mi in range(mi_n):
                    for ni in range(ni_n):
                        _mma(acc[mi, ni], a_frag[mi], b_frag[ni])
            # Epilogue mapping.
            for (mi, ni), lanes in acc.items():
                for l, v in enumerate(lanes):
                    r = wm * wtm + mi * 16 + (l >> 2)
                    c = wn * wtn + ni * 8 + (l & 3) * 2
                    C[r, c:c + 2] = v[0:2]
                    C[r + 8, c:c + 2] = v[2:4]
    np.testing.assert_array_equal(C, A @ B)


# ---------------------------------------------------------------- compile with nvcc

NVCC = shutil.which("nvcc")


def _compile(text: str, layout: str, tmp_path, name: str = "k") -> str:
    src = tmp_path / f"{name}_{layout}.cu"
    src.write_text(text)
    cmd = [NVCC, "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-Xptxas", "-v",
           "-I", str(INCLUDE_DIR), str(src), "-o", str(tmp_path / f"{name}_{layout}.cubin")]
    if layout == "TN":
        cmd.insert(1, "-DHGEMM_LAYOUT_TN")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stderr


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("fam", FAMILY_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_sample_compiles_without_spills(fam, tmp_path):
    import random

    sample = random.Random(1).sample(fam.variants(), 2)
    for p in sample:
        text = fam.render(p)
        for layout in parse_candidate(text).spec.layouts:
            report = _compile(text, layout, tmp_path)
            spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", report)]
            assert spills and not any(spills), f"{fam.name(p)} {layout} spills:\n{report}"
            regs = int(re.search(r"Used (\d+) registers", report).group(1))
            assert regs <= 255
            assert not any(int(x) for x in re.findall(r"(\d+) bytes gmem", report)), "module-scope state"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("fam", [wgmma], ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_first_variant_compiles_without_spills(fam, tmp_path):
    """The fast run's share of test_sample_compiles_without_spills (slow): one variant, one layout.
    (The header families: test_header_family_instantiations_compile_through_the_harness.)"""
    p = fam.variants()[0]
    text = fam.render(p)
    layout = parse_candidate(text).spec.layouts[0]
    report = _compile(text, layout, tmp_path)
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", report)]
    assert spills and not any(spills), f"{fam.name(p)} {layout} spills:\n{report}"
    assert int(re.search(r"Used (\d+) registers", report).group(1)) <= 255
    assert not any(int(x) for x in re.findall(r"(\d+) bytes gmem", report)), "module-scope state"


# Spill bytes (stores + loads) ptxas 13.0 gives the mma.sync 64x128 tiles with pair loads, in every
# split-K variant, keyed by (tile and stages, layout): 8-byte stack frames in the misaligned main loop
# (element loads do not spill). Every other instantiation has none.
KNOWN_SPILLS = {
    ("mma_sync_64x128x32_w2x2_s2", "NN"): 8, ("mma_sync_64x128x32_w2x2_s2", "TN"): 8,
    ("mma_sync_64x128x32_w2x2_s3", "NN"): 8, ("mma_sync_64x128x32_w2x2_s4", "NN"): 8,
    ("mma_sync_64x128x64_w2x2_s2", "NN"): 16, ("mma_sync_64x128x64_w2x2_s3", "TN"): 16,
    ("mma_sync_64x128x64_w2x2_s4", "TN"): 16,
}


def _harness_compile(fam, p, layout, cache) -> str:
    """Compile one instantiation the way the harness does (hgemm.compile); a failure message or ''."""
    cand = parse_candidate(fam.render(p))
    res = compile_candidate(cand, layout, arch="sm_90a", cache_dir=cache)
    r = res.resources
    if not res.ok:
        return f"{fam.name(p)} {layout}: {res.error[:500]}"
    name = fam.name(p)
    known = KNOWN_SPILLS.get((name[:name.index("_g")], layout), 0) if name.endswith("_mp") else 0
    if r.spill_stores + r.spill_loads != known or r.stack_frame > (8 if known else 0) or r.gmem or r.registers > 255:
        return f"{name} {layout}: {r}"
    return ""


def _instantiations(fam, params):
    return [(fam, p, layout) for p in params for layout in parse_candidate(fam.render(p)).spec.layouts]


# A handful of each header family: the first variant, a split-K one and (mma_sync) an element-loads one.
HARNESS_PICKS = {
    "mma_sync": lambda vs: [vs[0], next(p for p in vs if p["split_k"] == 16), dict(vs[1], misaligned_loads="elem")],
    "skinny": lambda vs: [vs[0], next(p for p in vs if p["kind"] == "tn" and p["split_k"] > 1)],
    "batched_small": lambda vs: [vs[-1]],
    # the most accumulators a thread (NB 16 x 2 rows, a CTA's warps sharing k) and the fewest
    "narrow": lambda vs: [next(p for p in vs if p["nb"] == 16 and p["r"] == 2 and p["kw"] == 8), vs[0],
                          next(p for p in vs if p["swap"])],
    # the most registers (K 16 x 8 columns, 2 rows a step) and the fewest
    "small_k": lambda vs: [next(p for p in vs if p["kmax"] == 16 and p["v"] == 8 and p["u"] == 2), vs[0]],
    # the most registers (8 tiles) in a cluster of 4, and the most CTAs an SM
    "skinny_mma": lambda vs: [next(p for p in vs if p["t"] == 8 and p["split"] == 4), vs[0]],
    # the most registers (K 64, 4 row groups a step) and the fewest
    "small_k_mma": lambda vs: [vs[-1], vs[0]],
}


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("fam", HEADER_FAMILIES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_header_family_instantiations_compile_through_the_harness(fam, tmp_path):
    """A few instantiations of each header family compile through hgemm.compile (the include path the
    harness gives candidates) for sm_90a without spills (beyond KNOWN_SPILLS), stack or module-scope state."""
    picks = HARNESS_PICKS[fam.__name__.rsplit(".", 1)[-1]](fam.variants())
    jobs = _instantiations(fam, picks)
    if fam is mma_sync:
        jobs = jobs[::2] + jobs[3:4]   # NN of each pick, and one TN
    failures = [msg for msg in (_harness_compile(f, p, layout, tmp_path) for f, p, layout in jobs) if msg]
    assert not failures, failures


def test_header_family_renders_list_every_layout_their_template_takes():
    """What the every-instantiation compile below covers: both layouts for every header family but the
    skinny kinds (one each) and the narrow swap variants (TN alone)."""
    jobs = [job for fam in HEADER_FAMILIES for job in _instantiations(fam, fam.variants())]
    swapped = sum(p["swap"] for p in narrow.variants())
    assert len(jobs) == (2 * (len(mma_sync.variants()) + len(batched_small.variants()) + len(narrow.variants())
                              + len(small_k.variants()) + len(skinny_mma.variants()) + len(small_k_mma.variants()))
                         + len(skinny.variants()) - swapped)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("fam", HEADER_FAMILIES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_header_family_instantiation_compiles_without_spills(fam, tmp_path):
    """Every variant of a header family, each layout it supports, through the harness's compile path: no
    spills (beyond KNOWN_SPILLS, exactly those), no stack frame, no module-scope state, <= 255 registers.
    A family at a time: mma_sync's 216 compiles alone take minutes on 2 cores."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    jobs = _instantiations(fam, fam.variants())
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        failures = [m for m in ex.map(lambda job: _harness_compile(*job, tmp_path), jobs) if m]
    assert not failures, failures


# ---------------------------------------------------------------- wgmma family

def _sw128(addr):
    """128B swizzle on absolute smem byte addresses: 16-byte chunk bits [4:6] ^= 128-byte row bits [7:9]."""
    return addr ^ (((addr >> 7) & 7) << 4)


def _tma_box_write(smem: np.ndarray, dst: int, box: np.ndarray) -> None:
    """A TMA box (rows x 64 fp16, 128 B per row) written with CU_TENSOR_MAP_SWIZZLE_128B at dst."""
    rows, cols = box.shape
    assert cols == 64 and dst % 1024 == 0
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    idx = _sw128(dst + r * 128 + 2 * c) // 2
    assert np.isnan(smem[idx]).all(), "two boxes overlap"
    smem[idx] = box


def _wgmma_read_kmajor(smem, start, sbo, rows):
    """rows x 16 operand from a K-major 128B-swizzled descriptor (LBO unused): element (m, k) at
    start + (m % 8) * 128 + (m // 8) * SBO + 2k, then swizzled (PTX canonical ((8,m),(T,2k)))."""
    m, k = np.meshgrid(np.arange(rows), np.arange(16), indexing="ij")
    return smem[_sw128(start + (m % 8) * 128 + (m // 8) * sbo + 2 * k) // 2]


def _wgmma_read_mnmajor(smem, start, lbo, sbo, n):
    """16 x n operand from an MN-major 128B-swizzled descriptor: element (k, j) at
    start + (j % 64) * 2 + (j // 64) * LBO + (k % 8) * 128 + (k // 8) * SBO, then swizzled
    (PTX canonical ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)))."""
    k, j = np.meshgrid(np.arange(16), np.arange(n), indexing="ij")
    return smem[_sw128(start + (j % 64) * 2 + (j // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo) // 2]


@pytest.mark.parametrize("share_a", [False, True])
@pytest.mark.parametrize("layout", ["NN", "TN"])
@pytest.mark.parametrize("tile", [(128, 256, 2), (256, 128, 2), (128, 192, 2), (128, 128, 1), (128, 64, 1)])
def test_wgmma_smem_descriptor_model(layout, tile, share_a):
    """One pipeline stage: the kernel's TMA destinations and descriptor start/LBO/SBO (mirrored from
    hgemm/include/hgemm/wgmma.cuh) reproduce A @ B under the PTX canonical-layout model. share_a: A
    arrives as a 2-CTA cluster sharing it loads it, two boxes of BM / 2 rows, rank r's at r * BM / 2
    rows into the stage (wgmma_gemm.cuh's Multicast::a)."""
    bm, bn, consumers = tile
    wm, bk = bm // consumers, 64
    rng = np.random.default_rng(1)
    A = rng.integers(-3, 4, (bm, bk)).astype(float)
    B = rng.integers(-3, 4, (bk, bn)).astype(float)
    ring = 3 * 1024                                   # any 1024-aligned base
    a_bytes = bm * bk * 2
    smem = np.full((ring + a_bytes + bn * bk * 2) // 2, np.nan)
    sa, sb = ring, ring + a_bytes
    if share_a:                                       # tensor_map A, box=(BM / 2, 64), one a rank
        for rank in range(2):
            _tma_box_write(smem, sa + rank * (bm // 2) * 128, A[rank * bm // 2:(rank + 1) * bm // 2])
    else:
        _tma_box_write(smem, sa, A)                   # tensor_map A, box=(BM, 64)
    for j in range(bn // 64):                         # tensor_map B, box=(64, 64)
        if layout == "TN":
            _tma_box_write(smem, sb + j * 8192, B.T[64 * j:64 * j + 64, :])   # rows n, cols k
        else:
            _tma_box_write(smem, sb + j * 8192, B[:, 64 * j:64 * j + 64])     # rows k, cols n
    C = np.full((bm, bn), np.nan)
    for cw in range(consumers):
        for mt in range(wm // 64):
            acc = np.zeros((64, bn))
            for kk in range(bk // 16):
                a = _wgmma_read_kmajor(smem, sa + cw * wm * 128 + mt * 64 * 128 + kk * 32, 1024, 64)
                if layout == "TN":
                    b = _wgmma_read_kmajor(smem, sb + kk * 32, 1024, bn).T
                else:
                    b = _wgmma_read_mnmajor(smem, sb + kk * 2048, 8192, 1024, bn)
                acc += a @ b
            C[cw * wm + mt * 64: cw * wm + mt * 64 + 64] = acc
    np.testing.assert_array_equal(C, A @ B)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_mma_sync_pair_loads_realign_like_element_loads(tmp_path):
    """The mma.sync family's pair loads for misaligned rows (misaligned_loads: pair): hgemm::realign16
    and hgemm::pair_blocks (hgemm/realign.cuh, which the kernels include), compiled by nvcc for the
    host, give for every even offset and every in-range count exactly the 8 elements the element
    loads would (out-of-range ones zero), and read a block only when it holds an in-range byte."""
    prog = tmp_path / "realign.cu"
    prog.write_text("\n".join([
        "#include <cstdio>\n#include <cstdint>\n#include <cuda_runtime.h>\n#include <hgemm/realign.cuh>",
        "using hgemm::pair_blocks;\nusing hgemm::realign16;",
        r"""int main() {
  uint32_t w[8];
  for (int i = 0; i < 8; ++i) w[i] = 0x9E3779B9u * (i + 1) ^ 0x85EBCA6Bu;   // distinct 16-bit halves
  const uint4 lo = make_uint4(w[0], w[1], w[2], w[3]), hi = make_uint4(w[4], w[5], w[6], w[7]);
  for (uint32_t off = 0; off < 16; off += 2)
    for (int keep = -1; keep <= 8; ++keep) {   // the fetch passes min(8, clim - gc), or 0
      const uint4 r = realign16(lo, hi, off, keep);
      printf("%u %d %d %u %u %u %u\n", off, keep, pair_blocks(off, keep), r.x, r.y, r.z, r.w);
    }
  return 0;
}""",
    ]))
    exe = tmp_path / "realign"
    subprocess.run([NVCC, "-std=c++17", "-I", str(INCLUDE_DIR), "-o", str(exe), str(prog)], check=True,
                   capture_output=True, timeout=300)
    rows = [list(map(int, line.split())) for line in
            subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout.split("\n") if line]
    words = np.array([(0x9E3779B9 * (i + 1) ^ 0x85EBCA6B) & 0xFFFFFFFF for i in range(8)], "<u4")
    elems = words.view(np.uint16)                       # the 16 fp16 slots of the two blocks
    assert len(rows) == 8 * 10
    for off, keep, nblk, *got in rows:
        want = elems[off // 2:off // 2 + 8].copy()      # what 8 element loads from the chunk start read
        want[max(0, keep):] = 0
        assert np.array(got, "<u4").view(np.uint16).tolist() == want.tolist(), (off, keep)
        in_range = [e for e in range(off // 2, off // 2 + max(0, keep))]  # slots holding in-range elements
        assert nblk == len({e // 8 for e in in_range}), (off, keep)     # exactly the blocks they lie in


def test_wgmma_accumulator_mapping_is_a_bijection():
    """Epilogue (row, col) of register 4j + 2h + e, lane l, warp w covers a 64 x N atom exactly once."""
    for n in (64, 128, 256):
        seen = np.zeros((64, n), dtype=int)
        for w in range(4):
            for lane in range(32):
                for reg in range(n // 2):
                    j, h, e = reg // 4, (reg // 2) % 2, reg % 2
                    seen[16 * w + lane // 4 + 8 * h, 8 * j + 2 * (lane % 4) + e] += 1
        assert (seen == 1).all()


def _row_pair_stores(acc_row, n0, N, bn, aligned):
    """The stores of one row of a warp's bn columns, mirrored from hgemm::store_row_pairs (common.cuh),
    which the wgmma and mma.sync epilogues call for rows that may start 2 bytes off (N odd, or C 2 bytes
    off): acc_row[q][j] is lane q's (v0, v1) pair of block j (columns n0 + 8j + 2q, + 1). Returns (first
    column, values) per store."""
    off = 0 if aligned else 1
    stores = []
    for q in range(4):
        c0 = n0 + 2 * q
        if off and q == 0 and c0 < N:
            stores.append((c0, [acc_row[0][0][0]]))
        for j in range(bn // 8):
            c = c0 + 8 * j
            v0, v1 = acc_row[q][j]
            # __shfl_sync from lane (q + 1) % 4: lane 0 offers its v0 of block j + 1, the others of j
            src = (q + 1) % 4
            v2 = (acc_row[0][j + 1][0] if j + 1 < bn // 8 else 0.0) if src == 0 else acc_row[src][j][0]
            col = c + off
            lo, hi = (v1, v2) if off else (v0, v1)
            whole = col + 1 < N and not (off and q == 3 and j == bn // 8 - 1)
            if whole:
                stores.append((col, [lo, hi]))
            elif col < N:
                stores.append((col, [lo]))
    return stores


@pytest.mark.parametrize("bn", [8, 16, 32, 64, 128, 192, 256])
def test_row_pair_stores_cover_every_column_once_and_pair_only_at_4_byte_addresses(bn):
    """A row that starts 2 bytes off 4-byte alignment (N odd: every other row) still stores its columns
    as 4-byte pairs, shifted by one, with the warp's first and last columns alone; ragged N included.
    bn: a warp's columns of a row, the wgmma tiles' 64-256 and the mma.sync warp tiles' 8-32."""
    rng = np.random.default_rng(0)
    for aligned in (True, False):
        for n0, N in [(0, bn), (0, bn + 3), (bn, 2 * bn - 1), (bn, bn + 1), (2 * bn, 2 * bn + 2)]:
            acc_row = [[tuple(rng.standard_normal(2)) for _ in range(bn // 8)] for _ in range(4)]
            want = {n0 + 8 * j + 2 * q + e: acc_row[q][j][e] for q in range(4) for j in range(bn // 8) for e in range(2)}
            got = {}
            for col, values in _row_pair_stores(acc_row, n0, N, bn, aligned):
                # a pair's address: the row start (0 or 2 mod 4 bytes) + 2 bytes a column
                assert len(values) == 1 or ((0 if aligned else 2) + 2 * col) % 4 == 0, (aligned, col)
                for i, v in enumerate(values):
                    assert col + i not in got, (aligned, n0, N, col + i)
                    got[col + i] = v
            assert set(got) == {c for c in want if c < N}, (aligned, n0, N)
            assert all(got[c] == want[c] for c in got)
            pairs = sum(len(v) == 2 for _, v in _row_pair_stores(acc_row, n0, N, bn, aligned))
            if N >= n0 + bn:  # a full tile row: all pairs but 2 singles where the row is off
                assert pairs == (bn // 2 if aligned else bn // 2 - 1)


def test_wgmma_spec_and_applicability():
    for p in wgmma.variants():
        text = wgmma.render(p)
        spec = parse_candidate(text).spec
        assert spec.layouts == ("NN", "TN")
        # staged: TMA from padded copies in the workspace, of both operands or of one
        ops = p.get("stage", "AB") if p.get("loader") == "staged" else ""
        # and, for the tensor stores of C, C's (never staged)
        c_map = [("C", (16, 64), 128, False)] if p.get("epilogue") == "bulk_tensor" else []
        assert [(t.operand, t.box, t.swizzle, t.staged) for t in spec.tensor_maps] == [
            ("A", (p["bm"], 64), 128, "A" in ops), ("B", (64, 64), 128, "B" in ops)] + c_map
        x = p.get("ctas_per_sm", 1)   # CTAs of the persistent grid an SM
        assert spec.block[0] == 128 * (1 + p["consumers"])
        assert f"__launch_bounds__({spec.block[0]}, {x})" in text
        grid, _, smem, _ = spec.launch_dims(dict(M=4096, N=4096, K=4096, batch=1, num_sms=132))
        # two CTAs an SM: one consumer, 32-64 accumulators a thread, both CTAs' smem (with the 1 KB of
        # barriers and the 1 KB the SM reserves for each) within the SM's 228 KB
        assert x == 1 or (p["consumers"] == 1 and p["bm"] * p["bn"] <= 8192 and 2 * (smem + 2048) <= 228 * 1024)
        cl, sk = p.get("cluster", 1), p.get("split_k", 1)
        ctas = cl * sk   # a cluster's CTAs; grids are whole clusters
        staged = p.get("loader") == "staged"
        # a staged split grid: no more clusters than the H200 runs at once (66 of 2, 30 of 4, 15 of 8),
        # since its barrier waits for every CTA
        resident = {2: 66, 4: 28, 8: 14}.get(sk, 132 // ctas) if staged else 132 * x // ctas
        assert grid == (resident * ctas, 1, 1) and smem <= 227 * 1024
        # ... which the H200 measured (cuOccupancyMaxActiveClusters, hgemm.tune.CLUSTER_CTAS_AT_ONCE)
        assert not (staged and sk > 1) or grid[0] <= CLUSTER_CTAS_AT_ONCE[sk]
        grid, _, _, _ = spec.launch_dims(dict(M=100, N=64, K=8, batch=1, num_sms=132))
        # a staged grid is every SM (every SM it can hold at once, split), tiles or not: each CTA copies
        # its share before the barrier; a cluster grid is whole clusters (the second CTA's tile lies
        # past M here); a split-K grid is one cluster of split_k CTAs a tile
        # (a stream-K grid is every SM: the few tiles' k tiles are shared out over all of them)
        tiles = -(-100 // p["bm"]) * -(-64 // p["bn"])
        plain = 132 if p.get("streamk") else sk * tiles
        assert grid == ((resident * ctas, 1, 1) if staged else (cl if cl > 1 else plain, 1, 1))
        assert ("__cluster_dims__(2, 1, 1)" in text) == (cl * sk == 2)
        assert (f"__cluster_dims__({sk}, 1, 1)" in text) == (sk > 1)
        if sk > 1:
            assert p.get("epilogue", "registers") == "registers" and cl == 1
            grid, _, _, _ = spec.launch_dims(dict(M=4096, N=4096, K=4096, batch=1, num_sms=131))
            assert grid == ((131 // 2 if sk == 2 else 131 * 7 // 8 // sk) * sk if staged else 131 // sk * sk, 1, 1)
        if cl > 1:
            grid, _, _, _ = spec.launch_dims(dict(M=4096, N=4096, K=4096, batch=1, num_sms=131))
            assert grid == (130, 1, 1)   # an odd SM count: whole clusters only
    big = dict(bm=128, bn=256, consumers=2, stages=4, group_m=8)
    assert wgmma.applicable(big, Problem(4096, 4096, 4096))
    assert wgmma.applicable(big, Problem(4096, 4096, 4096, layout="TN"))
    assert not wgmma.applicable(big, Problem(4096, 4096, 4095))      # A row pitch not 16-byte aligned
    assert not wgmma.applicable(big, Problem(4096, 4095, 4096))      # NN B row pitch
    assert wgmma.applicable(big, Problem(4096, 4095, 4096, layout="TN"))  # TN B rows are K long; C has no map
    assert wgmma.applicable(big, Problem(4095, 4096, 4096))          # an odd M is only a ragged edge
    assert not wgmma.applicable(big, Problem(1, 4096, 4096))         # skinny: not this family
    assert not wgmma.applicable(big, Problem(256, 256, 256))         # too few tiles for 128x256
    # a 64-row tile takes any M: decode-like problems stream B through the TMA ring
    row64 = dict(bm=64, bn=128, consumers=1, stages=6, group_m=8, split_k=4)
    assert row64 in wgmma.variants()
    assert wgmma.applicable(row64, Problem(16, 4096, 4096)) and wgmma.applicable(row64, Problem(1, 4096, 14336, layout="TN"))
    assert not wgmma.applicable(row64, Problem(16, 4096, 4095))      # A's rows still need 16-byte pitches
    assert not wgmma.applicable(row64, Problem(16, 32, 4096))        # N under one box
    assert not wgmma.applicable(dict(row64, bm=128), Problem(16, 4096, 4096))   # a 128-row tile: half its tensor work idle
    # cluster split-K: few tiles and a long K (32 tiles of 128 x 128 on 132 SMs), not many tiles or a short K
    split4 = dict(bm=128, bn=128, consumers=1, stages=4, group_m=8, split_k=4)
    assert split4 in wgmma.variants()
    assert wgmma.applicable(split4, Problem(1024, 512, 12288))
    assert wgmma.applicable(split4, Problem(1024, 512, 12288, layout="TN"))
    assert not wgmma.applicable(split4, Problem(4096, 4096, 4096))    # 1024 tiles fill the GPU already
    assert not wgmma.applicable(split4, Problem(1024, 512, 960))      # 15 k tiles: shares under 4
    assert not wgmma.applicable(split4, Problem(1024, 512, 12289))    # the TMA loader's pitches still hold
    # behind the staged loader, the shapes split4 refuses for their pitches: copying the operand TMA refuses
    staged4 = dict(bm=128, bn=128, consumers=1, stages=5, group_m=8, split_k=4, loader="staged", stage="A")
    assert staged4 in wgmma.variants()
    assert wgmma.applicable(staged4, Problem(1024, 512, 12289))       # odd K in NN: A's rows
    assert not wgmma.applicable(staged4, Problem(1024, 512, 12288))   # TMA takes it as it is
    assert not wgmma.applicable(staged4, Problem(1024, 512, 12289, layout="TN"))   # TN: B's rows are K long too
    assert wgmma.applicable(dict(staged4, stage="AB"), Problem(1024, 512, 12289, layout="TN"))
    assert not wgmma.applicable(staged4, Problem(4096, 4096, 4095))   # 1024 tiles fill the GPU already
    staged = [p for p in wgmma.variants() if p.get("loader") == "staged" and p.get("split_k", 1) == 1
              and not p.get("streamk")]
    both = [p for p in staged if p["stage"] == "AB"]
    for fed in both:
        assert wgmma.applicable(fed, Problem(4096, 4096, 4095))          # exactly the shapes TMA refuses
        # (the tensor stores of C need its rows 16-byte aligned: N % 8 == 0)
        assert wgmma.applicable(fed, Problem(4095, 4095, 4095)) != (fed.get("epilogue") == "bulk_tensor")
        assert wgmma.applicable(fed, Problem(4096, 4095, 4096)) != (fed.get("epilogue") == "bulk_tensor")
        assert not wgmma.applicable(fed, Problem(4096, 4096, 4096))      # TMA is legal: the plain kernel
        assert not wgmma.applicable(fed, Problem(4096, 4095, 4096, layout="TN"))
        assert not wgmma.applicable(fed, Problem(16, 4096, 4095))        # skinny
    # one operand copied: only where it alone has rows TMA refuses
    only_a = next(p for p in staged if p["stage"] == "A")
    only_b = next(p for p in staged if p["stage"] == "B")
    assert wgmma.applicable(only_a, Problem(4096, 4096, 4095))           # odd K, NN: A's rows; B's are N long
    assert not wgmma.applicable(only_a, Problem(4096, 4096, 4095, layout="TN"))  # TN: B's rows are K long too
    assert not wgmma.applicable(only_a, Problem(4095, 4095, 4095))
    assert wgmma.applicable(only_b, Problem(4096, 4095, 4096))           # odd N, NN: B's rows only
    assert not wgmma.applicable(only_b, Problem(4096, 4096, 4095))
    assert not any(wgmma.applicable(p, Problem(4096, 4096, 4096)) for p in staged)
    # stream-K: where the last round leaves two or more SMs a remainder tile idle and K holds two shares
    stk = dict(bm=128, bn=192, consumers=2, stages=4, group_m=8, epilogue="smem", streamk=8)
    assert stk in wgmma.variants()
    assert wgmma.applicable(stk, Problem(4096, 4096, 4096))        # 704 tiles: 44 left, 3 SMs each
    assert wgmma.applicable(stk, Problem(2455, 3840, 7680))        # 400 tiles: 4 left, split 8 ways
    assert wgmma.applicable(stk, Problem(128, 512, 7616))          # 3 tiles, all split
    assert wgmma.applicable(stk, Problem(4224, 4224, 4096))        # 726 tiles: 66 left, 2 SMs each
    assert not wgmma.applicable(stk, Problem(4096, 4608, 4096))    # 768 tiles: 108 left, 1 SM each
    assert not wgmma.applicable(stk, Problem(4096, 4096, 448))     # 7 k tiles: no two shares of 4
    # two CTAs an SM where the tiles outnumber the SMs; where they do not, the one-CTA grid is the same
    two = dict(bm=64, bn=64, consumers=1, stages=6, group_m=8, epilogue="smem", ctas_per_sm=2)
    assert two in wgmma.variants() and wgmma.name(two) == "wgmma_64x64x64_c1_s6_g8_x2_es"
    assert wgmma.applicable(two, Problem(1024, 1024, 1024))        # 256 tiles
    assert wgmma.applicable(two, Problem(256, 256, 256, 16))       # 256 tiles, batched
    assert not wgmma.applicable(two, Problem(512, 512, 512))       # 64 tiles
    assert not any(p.get("ctas_per_sm", 1) > 1 and (p["consumers"] > 1 or p.get("streamk") or p.get("split_k", 1) > 1
                   or p.get("cluster", 1) > 1 or p.get("loader") == "staged") for p in wgmma.variants())
    # 128 x 128 with 3 stages and the register epilogue fits twice (its accumulators from the producer's
    # registers), but loses to one CTA with a deeper ring there (benchmarks/two_ctas/): no variant
    x2_128 = dict(bm=128, bn=128, consumers=1, stages=3, group_m=8, ctas_per_sm=2)   # the register epilogue
    assert wgmma._valid(dict(x2_128, ctas_per_sm=1)) and not wgmma._valid(x2_128)
    assert wgmma.sm_holds(x2_128)
    assert "wgmma_gemm<128, 128, 1, 3, 8, 1, Epilogue::registers, Loader::tma, 1, 0, 2>" in wgmma.render(x2_128)
    assert not wgmma._valid(dict(two, bn=128, stages=4))           # two CTAs' rings past 228 KB
    staged_stk = dict(stk, bm=128, bn=128, consumers=1, stages=5, loader="staged", stage="AB")
    assert staged_stk in wgmma.variants()
    assert not wgmma.applicable(staged_stk, Problem(4096, 4096, 4095))   # 1024 tiles: 100 left, 1 SM each
    assert wgmma.applicable(staged_stk, Problem(1041, 256, 11201))        # 18 tiles, all split


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_clusters_sharing_a_group_tile_columns(tmp_path):
    """`multicast: A`: a cluster is two horizontally adjacent tiles, so its grid counts groups of two tile
    columns (the last may stick out past N) where a B-sharing one counts groups of two tile rows; the
    entry instantiates Multicast::a and compiles clean."""
    p = dict(bm=256, bn=128, consumers=2, stages=3, group_m=8, epilogue="smem", cluster=2, multicast="A")
    assert wgmma._valid(p) and not wgmma._valid(dict(p, cluster=1)) and not wgmma._valid(dict(p, multicast="C"))
    text = wgmma.render(p)
    assert wgmma.name(p) == "wgmma_256x128x64_c2_s3_g8_cl2a_es"
    assert "__cluster_dims__(2, 1, 1)" in text and "Epilogue::smem, Loader::tma, 1, 0, 1, Multicast::a>" in text
    spec = parse_candidate(text).spec
    by_rows = parse_candidate(wgmma.render(dict(p, multicast="B"))).spec
    # each CTA of the cluster loads half of the shared A tile's rows for both
    assert [t.render() for t in spec.tensor_maps] == ["tensor_map: A, box=(128, 64), swizzle=128",
                                                       "tensor_map: B, box=(64, 64), swizzle=128"]
    assert by_rows.tensor_maps[0].render() == "tensor_map: A, box=(256, 64), swizzle=128"
    for (m, n), cols, rows in (((256, 640), 3, 1), ((768, 128), 1, 2), ((4096, 4096), 16, 8)):
        env = dict(M=m, N=n, K=64, batch=1, num_sms=132)
        # 640 columns: 5 tiles, 3 groups of two (the last one's peer past N); 768 rows: 3 tiles, 2 groups
        assert spec.launch_dims(env)[0] == (2 * min(66, -(-m // 256) * cols), 1, 1)
        assert by_rows.launch_dims(env)[0] == (2 * min(66, rows * -(-n // 128)), 1, 1)
    _assert_wgmma_compiles_clean(p, tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_all_variants_compile_clean(tmp_path):
    """Every variant, both layouts: no spills, no ignored setmaxnreg (C7508), no serialised wgmma, and
    registers that let one CTA of the kernel's block size fit an SM (65536 registers, 8-register steps)."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(lambda p: _assert_wgmma_compiles_clean(p, tmp_path), wgmma.variants()))


def _wgmma_option_cover() -> list[dict]:
    """A few variants that between them instantiate wgmma_gemm for every tile shape (BM, BN, consumers)
    and every option it specialises on (loader and staged operands, epilogue, cluster, split-K, stream-K):
    greedily, the variant that adds the most not yet covered."""
    def keys(p):
        return {("tile", p["bm"], p["bn"], p["consumers"]), ("loader", p.get("loader", "tma"), p.get("stage")),
                ("epilogue", p.get("epilogue", "registers")), ("cluster", p.get("cluster", 1)),
                ("split_k", p.get("split_k", 1)), ("streamk", p.get("streamk", 0)),
                ("ctas_per_sm", p.get("ctas_per_sm", 1))}

    vs, covered, picked = wgmma.variants(), set(), []
    everything = set().union(*map(keys, vs))
    while covered != everything:
        best = max(vs, key=lambda p: len(keys(p) - covered))
        picked.append(best)
        covered |= keys(best)
    return picked


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_instantiations_compile_clean(tmp_path):
    """The fast run's share of test_wgmma_all_variants_compile_clean (slow), the same checks, NN and TN,
    on one variant of each tile shape and option (_wgmma_option_cover), compiled in parallel."""
    picked = _wgmma_option_cover()
    assert len(picked) <= 11
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(lambda p: _assert_wgmma_compiles_clean(p, tmp_path), picked))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_last_tile_parked_takes_the_ring_room_of_the_parked_buffer(tmp_path):
    """`epilogue: last`: no parked buffer, so the ring one stage deeper than the parked epilogue's on the
    large tiles, the last tile parked over the ring (which must hold it); whole tiles through TMA or a
    staged loader only, and the entry instantiates Epilogue::last_parked and compiles clean."""
    p = dict(bm=128, bn=256, consumers=2, stages=4, group_m=8, epilogue="last")
    assert wgmma._valid(p) and wgmma.name(p) == "wgmma_128x256x64_c2_s4_g8_el"
    assert not wgmma._valid(dict(p, epilogue="smem")) and wgmma._valid(dict(p, epilogue="smem", stages=3))
    assert wgmma._smem_bytes(p) == wgmma._smem_bytes(dict(p, epilogue="registers"))
    assert "wgmma_gemm<128, 256, 2, 4, 8, 1, Epilogue::last_parked, Loader::tma>" in wgmma.render(p)
    assert wgmma._valid(dict(p, loader="staged", stage="AB"))
    for other in (dict(cluster=2), dict(split_k=2), dict(streamk=8), dict(bm=64, bn=64, consumers=1, ctas_per_sm=2)):
        assert not wgmma._valid(dict(p, **other)), other
    # a ring of 64 x 64 tiles at 3 stages (48 KB) holds the parked 64 x 64 tile (9 KB)
    assert wgmma._valid(dict(p, bm=64, bn=64, consumers=1, stages=3))
    _assert_wgmma_compiles_clean(p, tmp_path)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_bulk_copy_epilogue_keeps_the_parked_buffer_and_whole_tiles(tmp_path):
    """`epilogue: bulk`: the parked buffer of `epilogue: smem` (the same ring depths fit), whole tiles or
    clusters, one CTA an SM or two, no split-K or stream-K; the entry instantiates Epilogue::bulk and
    compiles clean in both layouts, with the bulk copies and their proxy fence in the SASS."""
    p = dict(bm=128, bn=256, consumers=2, stages=3, group_m=8, epilogue="bulk")
    assert wgmma._valid(p) and wgmma.name(p) == "wgmma_128x256x64_c2_s3_g8_eb"
    assert wgmma._smem_bytes(p) == wgmma._smem_bytes(dict(p, epilogue="smem"))
    assert not wgmma._valid(dict(p, stages=4)) and wgmma._valid(dict(p, stages=4, epilogue="registers"))
    assert "wgmma_gemm<128, 256, 2, 3, 8, 1, Epilogue::bulk, Loader::tma>" in wgmma.render(p)
    for ok in (dict(cluster=2), dict(loader="staged", stage="AB"), dict(bm=64, bn=64, consumers=1, stages=3, ctas_per_sm=2)):
        assert wgmma._valid(dict(p, **ok)), ok
    for other in (dict(split_k=2, epilogue="bulk", bm=128, bn=128, consumers=1, stages=4), dict(streamk=8)):
        assert not wgmma._valid(dict(p, **other)), other
    _assert_wgmma_compiles_clean(p, tmp_path)
    counts = (sass.profile(tmp_path / f"{wgmma.name(p)}_NN.cubin", wgmma.name(p)) or {}).get("counts")
    if counts is not None:   # nvdisasm present
        assert counts.get("UBLKCP") and counts.get("HGMMA"), counts


def test_wgmma_every_two_consumer_parked_variant_has_its_bulk_copy_twin_and_no_other_does():
    """The family lists `epilogue: bulk` exactly as the twin of each two-consumer variant with the parked
    epilogue (same tile, ring, cluster and loader: epilogue_twin, both ways), never on one consumer
    warpgroup, split-K or stream-K, where the experiment measured it slower or the template refuses it."""
    variants = wgmma.variants()
    bulk = [p for p in variants if p.get("epilogue") == "bulk"]
    parked = [p for p in variants if p.get("epilogue") == "smem" and p["consumers"] == 2 and wgmma.epilogue_twin(p)]
    key = wgmma.name
    assert sorted(map(key, bulk)) == sorted(key(wgmma.epilogue_twin(p)) for p in parked) and len(bulk) >= 12
    assert sorted(map(key, parked)) == sorted(key(wgmma.epilogue_twin(p)) for p in bulk)
    assert all(p["consumers"] == 2 and not wgmma._split(p) > 1 and not wgmma._streamk(p) for p in bulk)
    assert {(p["bm"], p["bn"]) for p in bulk} == {(128, 256), (256, 128), (128, 192), (128, 128), (128, 64)}
    assert wgmma.epilogue_twin(dict(bm=128, bn=128, consumers=1, stages=5, group_m=8, epilogue="smem")) is None
    assert wgmma.epilogue_twin(dict(bm=128, bn=128, consumers=2, stages=5, group_m=8)) is None   # registers


def test_wgmma_every_parked_or_bulk_variant_has_its_tensor_store_twin():
    """`epilogue: bulk_tensor` is listed exactly as the tensor_twin of each two-consumer variant with the
    bulk copies (and so of its parked twin) but those that copy B alone (NN with N % 8 != 0, where C's rows
    are misaligned too), and of each whole-tile one-consumer variant with the parked epilogue, one or two
    CTAs an SM; with the C tensor map its stores go through, and applies only where C's rows are 16-byte
    aligned."""
    variants = wgmma.variants()
    tensor = [p for p in variants if p.get("epilogue") == "bulk_tensor"]
    bulk = [p for p in variants if p.get("epilogue") == "bulk"]
    parked_one = [p for p in variants if p["consumers"] == 1 and p.get("epilogue") == "smem"]
    assert [wgmma.name(p) for p in bulk if not wgmma.tensor_twin(p)] == [
        "wgmma_128x256x64_c2_s3_g8_eb_stagedB", "wgmma_256x128x64_c2_s3_g8_eb_stagedB"]
    # one consumer: stream-K tiles have no twin, every other parked one has
    assert {wgmma.name(p) for p in parked_one if not wgmma.tensor_twin(p)} == {
        wgmma.name(p) for p in parked_one if p.get("streamk")}
    twins = [t for p in bulk + parked_one if (t := wgmma.tensor_twin(p))]
    assert sorted(map(wgmma.name, tensor)) == sorted(map(wgmma.name, twins))
    assert len(tensor) >= 30 and sum(p.get("ctas_per_sm", 1) == 2 for p in tensor) == 4
    assert all(wgmma.tensor_twin(wgmma.epilogue_twin(p)) == wgmma.tensor_twin(p) for p in bulk)
    assert wgmma.tensor_twin(tensor[0]) is None
    one = wgmma.tensor_twin(dict(bm=128, bn=128, consumers=1, stages=5, group_m=8, epilogue="smem"))
    assert wgmma.name(one) == "wgmma_128x128x64_c1_s5_g8_ebt"
    assert wgmma.tensor_twin(dict(bm=128, bn=128, consumers=1, stages=5, group_m=8)) is None   # registers
    p = next(p for p in tensor if wgmma.name(p) == "wgmma_128x256x64_c2_s3_g8_ebt")
    spec = parse_candidate(wgmma.render(p)).spec
    assert spec.tensor_maps[2].render() == "tensor_map: C, box=(16, 64), swizzle=128"
    assert wgmma.applicable(p, Problem(1419, 14848, 64)) and not wgmma.applicable(p, Problem(1419, 14847, 64, 1, "TN"))


def _assert_wgmma_compiles_clean(p, tmp_path) -> None:
    text = wgmma.render(p)
    threads = parse_candidate(text).spec.block[0]
    # 384 threads (2 consumers): 168; 256: 255; two CTAs of 256 an SM: 128
    limit = min(255, 65536 // threads // p.get("ctas_per_sm", 1) // 8 * 8)
    for layout in ("NN", "TN"):
        report = _compile(text, layout, tmp_path, wgmma.name(p))
        assert "C7508" not in report and "setmaxnreg" not in report, report
        assert "serializ" not in report.lower(), report
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", report)]
        assert spills and not any(spills), f"{wgmma.name(p)} {layout} spills:\n{report}"
        assert int(re.search(r"Used (\d+) registers", report).group(1)) <= limit, (wgmma.name(p), layout)
        assert not any(int(x) for x in re.findall(r"(\d+) bytes gmem", report)), "module-scope state"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_wgmma_staged_copies_are_what_the_tensor_maps_describe(layout, tmp_path):
    """loader: staged. The kernel's own staging loop (hgemm/staged_loader.cuh), compiled by nvcc for the
    host and run as grids of a few threads, copies A and B from 2-byte-aligned bases into padded rows at
    the offsets hgemm.params.staged_operands gives the harness's descriptors; the pad is zero, and the
    spec's workspace holds both copies and the counter."""
    from hgemm.params import staged_operands

    p = dict(bm=128, bn=128, consumers=2, stages=4, group_m=8, loader="staged")
    src = wgmma.render(p)
    prog = tmp_path / "staging.cu"
    prog.write_text("\n".join([
        "#include <cstdio>\n#include <cstdint>\n#include <vector>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>",
        "#include <hgemm/staged_loader.cuh>\nusing namespace hgemm::sm90;",
        r"""// usage: staging ROWS COLS SHIFT THREADS IN OUT: copies IN's fp16 rows (from element SHIFT of a
// 16-byte aligned buffer) the way a grid of THREADS threads runs stage_rows_from, into OUT
int main(int argc, char** argv) {
  const long long rows = atoll(argv[1]), threads = atoll(argv[4]);
  const int cols = atoi(argv[2]), shift = atoi(argv[3]);
  std::vector<uint4> in((rows * cols + shift + 15) / 8 + 2);
  std::vector<uint4> out(staged_end(rows, cols) / 16, make_uint4(~0u, ~0u, ~0u, ~0u));  // not zero: the pad is written
  FILE* f = fopen(argv[5], "rb");
  if (fread(reinterpret_cast<uint16_t*>(in.data()) + shift, 2, rows * cols, f) != size_t(rows * cols)) return 1;
  fclose(f);
  const __half* a = reinterpret_cast<const __half*>(reinterpret_cast<uint16_t*>(in.data()) + shift);
  for (long long t = 0; t < threads; ++t) stage_rows_from(a, reinterpret_cast<__half*>(out.data()), rows, cols, t, threads);
  f = fopen(argv[6], "wb");
  fwrite(out.data(), 16, out.size(), f);
  fclose(f);
  printf("%lld\n", staged_end(rows, cols));
  return 0;
}""",
    ]))
    exe = tmp_path / "staging"
    subprocess.run([NVCC, "-std=c++17", "-I", str(INCLUDE_DIR), "-o", str(exe), str(prog)], check=True, capture_output=True,
                   timeout=300)
    spec = parse_candidate(src).spec
    rng = np.random.default_rng(7)
    for M, N, K, batch in [(5, 11, 13, 2), (130, 67, 257, 1), (3, 8, 4095, 1), (17, 4097, 9, 3)]:
        problem = Problem(M, N, K, batch, layout)
        staged = staged_operands(spec, problem)
        assert [s.operand for s in staged] == ["A", "B"] and staged[0].offset == 0
        ends = []
        for s in staged:
            data = rng.integers(0, 1 << 16, size=s.batch * s.rows * s.cols, dtype=np.uint16)
            # element offsets of the operand's base within a 16-byte block, and grids of a few threads
            # (steps shorter and longer than a row, so the (row, chunk) carry is exercised)
            for shift, threads in ((1, 5), (3, 13), (6, 1000)):
                data.tofile(tmp_path / "in.bin")
                (tmp_path / "out.bin").write_bytes(b"")
                end = int(subprocess.run([str(exe), str(s.batch * s.rows), str(s.cols), str(shift), str(threads),
                                          str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True,
                                         capture_output=True, text=True, timeout=60).stdout)
                got = np.fromfile(tmp_path / "out.bin", dtype=np.uint16)[:s.batch * s.rows * s.pitch]
                want = np.zeros((s.batch * s.rows, s.pitch), np.uint16)
                want[:, :s.cols] = data.reshape(-1, s.cols)
                assert np.array_equal(got.reshape(-1, s.pitch), want), (problem.key, s.operand, shift)
            assert s.offset + end == s.end
            ends.append(end)
        # the kernel's counter sits right after B's copy: inside the workspace the spec asks for
        env = problem.variables() | {"num_sms": 132}
        assert ends[0] + ends[1] + 4 <= spec.workspace(env)
        # a kernel copying one operand puts that copy at the start, its counter after it, and its other
        # tensor map on the operand itself
        for op, own in (("A", ends[0]), ("B", ends[1])):
            one = parse_candidate(wgmma.render(dict(p, stage=op))).spec
            (copy,) = staged_operands(one, problem)
            assert (copy.operand, copy.offset, copy.end) == (op, 0, own) and own + 4 <= one.workspace(env)
            assert [t.staged for t in one.tensor_maps] == [op == "A", op == "B"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_streamk_schedule_covers_every_k_tile_once(tmp_path):
    """streamk: the kernel's own work split (StreamKTiles, hgemm/streamk.cuh), compiled by nvcc for the
    host and run for every CTA of a grid: every k tile of every output tile is computed once; a tile
    past the last whole wave is split where the CTAs that round leaves idle give it two or more, each
    over the same number of CTAs, whose shares are the same k ranges on every split tile (share j of
    every tile is read at the same time) and differ by at most a k tile; a CTA has at most one share,
    its first piece of work; an owner's contributors are exactly the CTAs after it up to last_cta();
    every CTA runs as many whole tiles where tiles are split; and the cost model's busiest CTA
    (hgemm.cost.streamk_work) is the busiest CTA here."""
    from hgemm.cost import streamk_work

    prog = tmp_path / "streamk.cu"
    prog.write_text("""#include <cstdio>
#include <cstdlib>
#include <hgemm/streamk.cuh>
using namespace hgemm::sm90;
// usage: streamk TOTAL NK CTAS: per CTA its items (tile kb ke), then the owners' last contributing CTA
int main(int argc, char** argv) {
  const int total = atoi(argv[1]), nk = atoi(argv[2]), ctas = atoi(argv[3]);
  printf("min_units %d\\n", StreamKTiles<WAYS>::MIN_UNITS);
  for (int c = 0; c < ctas; ++c) {
    const StreamKTiles<WAYS> sk(total, nk, c, ctas);
    printf("cta %d split_tiles %d\\n", c, sk.split_tiles);
    StreamKCursor cur = sk.start();
    for (StreamKItem it; sk.next(cur, it);)
      printf("item %d %d %d %d\\n", it.tile, it.kb, it.ke, it.tile < sk.split_tiles && it.kb == 0 && it.ke < nk ? sk.last_cta(it.tile) : -1);
  }
  return 0;
}
""".replace("WAYS", str(wgmma.STREAMK_WAYS)))
    exe = tmp_path / "streamk"
    subprocess.run([NVCC, "-std=c++17", "-I", str(INCLUDE_DIR), "-o", str(exe), str(prog)], check=True, capture_output=True,
                   timeout=300)
    # (tiles, k tiles, CTAs): a last wave of a few tiles, of a third, of most of the SMs (nothing split),
    # fewer tiles than CTAs, whole waves, a K too short to split finely, one tile, no tiles, no K
    for total, nk, ctas in [(400, 120, 132), (300, 120, 132), (248, 224, 132), (16, 119, 132), (264, 40, 132),
                            (133, 9, 132), (1, 200, 132), (5, 3, 132), (140, 64, 132), (7, 1000, 16), (0, 10, 132),
                            (50, 0, 132), (17, 33, 8)]:
        out = subprocess.run([str(exe), str(total), str(nk), str(ctas)], check=True, capture_output=True, text=True,
                             timeout=60).stdout.split("\n")
        assert out[0] == f"min_units {wgmma.STREAMK_MIN_UNITS}"
        items: dict[int, list[tuple[int, int, int, int]]] = {}
        split = 0
        for line in out[1:]:
            f = line.split()
            if f and f[0] == "cta":
                cta, split = int(f[1]), int(f[3])
                items[cta] = []
            elif f and f[0] == "item":
                items[cta].append(tuple(int(x) for x in f[1:]))
        covered = {}
        for cta, its in items.items():
            for tile, kb, ke, _ in its:
                assert 0 <= kb < ke <= nk or (nk == 0 and kb == ke == 0)   # K = 0: whole tiles of zeros
                for k in range(kb, ke):
                    assert (tile, k) not in covered, (total, nk, ctas, tile, k)
                    covered[(tile, k)] = cta
        assert set(covered) == {(t, k) for t in range(total) for k in range(nk)}, (total, nk, ctas)
        rest = 0 if nk == 0 else (total if total < ctas else total % ctas)
        ways = min(wgmma.STREAMK_WAYS, nk // wgmma.STREAMK_MIN_UNITS, ctas // rest if rest else 0)
        assert split == (rest if ways >= 2 else 0), (total, nk, ctas)
        ranges: dict[int, list[tuple[int, int]]] = {}   # split tile -> its shares' k ranges, in CTA order
        for cta, its in items.items():
            shared = [it for it in its if it[0] < split]
            assert len(shared) <= 1 and all(it[0] >= split for it in its[len(shared):]), (total, nk, ctas, cta)
            for tile, kb, ke, last in shared:
                ranges.setdefault(tile, []).append((kb, ke))
                if kb == 0:   # the owner: the rest of its tile is exactly CTAs cta + 1 .. last
                    others = {covered[(tile, k)] for k in range(ke, nk)}
                    assert others == set(range(cta + 1, last + 1)), (total, nk, ctas, tile)
        assert all(r == ranges[0] for r in ranges.values()), (total, nk, ctas)   # aligned: the same k ranges
        assert not ranges or len(ranges[0]) == ways
        whole = {sum(1 for it in its if it[0] >= split) for its in items.values()}
        assert len(whole) == 1 if split else max(whole) - min(whole) <= 1, (total, nk, ctas)
        shares = [ke - kb for kb, ke in ranges.get(0, [])]
        assert not shares or max(shares) - min(shares) <= 1
        if ctas == 132 and total:
            busiest = max(sum(ke - kb for _, kb, ke, _ in its) for its in items.values())
            assert streamk_work({"streamk": wgmma.STREAMK_WAYS}, total, nk, 1)[0] == busiest, (total, nk)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_wgmma_streamk_slots_follow_the_staged_copies(tmp_path):
    """streamk behind the staged loader: the kernel puts its slots and flags at staged_workspace_end
    (hgemm/staged_loader.cuh, compiled for the host here), right after the copies the harness's tensor
    maps describe (hgemm.params.staged_operands) and the barrier's counters, and the spec's workspace
    holds the slots and flags of num_sms CTAs after them."""
    from hgemm.params import staged_operands

    prog = tmp_path / "ends.cu"
    prog.write_text("""#include <cstdio>
#include <cstdlib>
#include <hgemm/staged_loader.cuh>
using namespace hgemm::sm90;
int main(int argc, char** argv) {
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), batch = atoi(argv[4]);
  const bool tn = atoi(argv[5]);
  printf("%lld %lld %lld\\n", tn ? staged_workspace_end<true, true, true>(M, N, K, batch) : staged_workspace_end<true, true, false>(M, N, K, batch),
         tn ? staged_workspace_end<true, false, true>(M, N, K, batch) : staged_workspace_end<true, false, false>(M, N, K, batch),
         tn ? staged_workspace_end<false, true, true>(M, N, K, batch) : staged_workspace_end<false, true, false>(M, N, K, batch));
  return 0;
}
""")
    exe = tmp_path / "ends"
    subprocess.run([NVCC, "-std=c++17", "-I", str(INCLUDE_DIR), "-o", str(exe), str(prog)], check=True, capture_output=True,
                   timeout=300)
    variants = [v for v in wgmma.variants() if v.get("streamk") and v.get("loader") == "staged"]
    assert {v["stage"] for v in variants} == {"AB", "A", "B"}
    for M, N, K, batch in [(1000, 1000, 1001, 1), (128, 517, 7616, 1), (130, 136, 4097, 3), (5, 11, 13, 2)]:
        for layout in ("NN", "TN"):
            problem = Problem(M, N, K, batch, layout)
            ends = subprocess.run([str(exe), str(M), str(N), str(K), str(batch), str(int(layout == "TN"))], check=True,
                                  capture_output=True, text=True, timeout=60).stdout.split()
            kernel_end = dict(zip(("AB", "A", "B"), map(int, ends)))
            env = problem.variables() | {"num_sms": 132}
            for v in variants:
                spec = parse_candidate(wgmma.render(v)).spec
                copies = max(c.end for c in staged_operands(spec, problem))
                assert kernel_end[v["stage"]] == copies + 1024, (wgmma.name(v), problem.key)
                # (the spec sizes B's copy for either layout, the larger: room to spare in one of them)
                assert spec.workspace(env) >= copies + 1024 + 132 * (v["bm"] * v["bn"] * 4 + 8)


def test_every_family_render_fits_its_template_and_a_mixed_one_is_named():
    from kernels_corpus.families import all_variants
    from kernels_corpus.families.consistency import mismatch

    assert [name for name, text in all_variants() if mismatch(text)] == []
    split = wgmma.render(dict(bm=128, bn=128, consumers=1, stages=4, group_m=8, split_k=4))
    assert mismatch(split.replace("__cluster_dims__(4, 1, 1)", "__cluster_dims__(2, 1, 1)")).endswith(
        "__cluster_dims__: cluster (2, 1, 1), the kernel's (4, 1, 1)")
    assert "tensor_map: tensor maps" in mismatch(split.replace("box=(128, 64)", "box=(64, 64)"))
    # a configuration no family renders is not judged here; neither is a text without a family template
    assert mismatch(split.replace("wgmma_gemm<128, 128, 1, 4,", "wgmma_gemm<128, 128, 1, 7,")) is None
    assert mismatch((INCLUDE_DIR.parent.parent / "kernels_corpus/reference/mma_pipelined.cu").read_text()) is None

"""Indexing tasks: gathers (data-dependent reads), scatter-add and histogram (data-dependent writes,
so atomics). Gathers are copies and must be bit-exact; the histogram counts integers and is exact.

Scatter-add sums floats with atomics in whatever order the hardware serialises them, so its result
is not bitwise reproducible. Bin b receives k_b ~ n / bins rows of N(0, 1) values: any summation order
errs ~u * sqrt(k) * |partial sums| (~1e-5 at k ~ 256), with a worst case of (k - 1) * u * sum |x| ~
3e-3; atol 1e-3 with rtol 1e-4 accepts every order in practice while a dropped or doubled term
(error ~1) fails.
"""

from __future__ import annotations

import torch

from .base import KernelTask, Param, load_solution, normal, randint, uniform

EMBEDDING_GATHER_F16 = KernelTask(
    name="embedding_gather_f16",
    description=(
        "Embedding lookup in float16: table has shape (vocab, dim), row-major; ids is int64 of shape (n) with "
        "values in [0, vocab); out[i, :] = table[ids[i], :], float16 of shape (n, dim)."
    ),
    params=(
        Param("table", "in", "float16", "vocab, dim"),
        Param("ids", "in", "int64", "n"),
        Param("out", "out", "float16", "n, dim"),
        Param("vocab", "scalar", "int32", "vocab"),
        Param("dim", "scalar", "int32", "dim"),
        Param("n", "scalar", "int32", "n"),
    ),
    variables=("vocab", "dim", "n"),
    sizes=(
        {"vocab": 50, "dim": 13, "n": 7},
        {"vocab": 1000, "dim": 256, "n": 512},
        {"vocab": 32000, "dim": 1024, "n": 16384},
    ),
    make_inputs=lambda s, g: {
        "table": normal(g, (s["vocab"], s["dim"]), dtype=torch.float16),
        "ids": randint(g, (s["n"],), 0, s["vocab"]),
    },
    compute=lambda i, s: {"out": i["table"][i["ids"]]},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("embedding_gather_f16.cu"),
)

GATHER_COLS_F32 = KernelTask(
    name="gather_cols_f32",
    description=(
        "Gather along columns (torch.gather with dim=1) in float32: x has shape (rows, cols), row-major; idx is "
        "int64 of shape (rows, k) with values in [0, cols); out[r, j] = x[r, idx[r, j]], float32 of shape (rows, k)."
    ),
    params=(
        Param("x", "in", "float32", "rows, cols"),
        Param("idx", "in", "int64", "rows, k"),
        Param("out", "out", "float32", "rows, k"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
        Param("k", "scalar", "int32", "k"),
    ),
    variables=("rows", "cols", "k"),
    sizes=({"rows": 3, "cols": 37, "k": 5}, {"rows": 100, "cols": 1000, "k": 64}, {"rows": 8192, "cols": 4096, "k": 2048}),
    make_inputs=lambda s, g: {
        "x": normal(g, (s["rows"], s["cols"])),
        "idx": randint(g, (s["rows"], s["k"]), 0, s["cols"]),
    },
    compute=lambda i, s: {"out": torch.gather(i["x"], 1, i["idx"])},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("gather_cols_f32.cu"),
)


def _scatter_add(i, s):
    src = i["src"]
    out = torch.zeros((s["bins"], s["dim"]), dtype=src.dtype, device=src.device)
    return {"out": out.index_add_(0, i["idx"], src)}


SCATTER_ADD_F32 = KernelTask(
    name="scatter_add_f32",
    description=(
        "Scatter-add rows in float32 (index_add along dim 0 into zeros): src has shape (n, dim), row-major; idx is "
        "int64 of shape (n) with values in [0, bins), repeats allowed; out[b, :] = sum of src[i, :] over all i with "
        "idx[i] == b, and 0 for bins no index hits. out is float32 of shape (bins, dim)."
    ),
    params=(
        Param("src", "in", "float32", "n, dim"),
        Param("idx", "in", "int64", "n"),
        Param("out", "out", "float32", "bins, dim"),
        Param("n", "scalar", "int32", "n"),
        Param("dim", "scalar", "int32", "dim"),
        Param("bins", "scalar", "int32", "bins"),
    ),
    variables=("n", "dim", "bins"),
    # The middle size leaves some bins empty (n < bins), so the zero fill is checked.
    sizes=({"n": 7, "dim": 5, "bins": 3}, {"n": 150, "dim": 64, "bins": 200}, {"n": 131072, "dim": 128, "bins": 512}),
    make_inputs=lambda s, g: {
        "src": normal(g, (s["n"], s["dim"])),
        "idx": randint(g, (s["n"],), 0, s["bins"]),
    },
    compute=_scatter_add,
    atol=1e-3,
    rtol=1e-4,
    solution=load_solution("scatter_add_f32.cu"),
)


def _histogram_inputs(s, g):
    # u^2 skews the values toward low bins, so some bins are hot (atomic contention) and some empty.
    u = uniform(g, (s["n"],), 0.0, 1.0, dtype=torch.float64)
    return {"values": (u * u * s["bins"]).floor().clamp_(0, s["bins"] - 1).to(torch.int32)}


HISTOGRAM_I32 = KernelTask(
    name="histogram_i32",
    description=(
        "Histogram of int32 values: values has shape (n) with entries in [0, bins); counts[b] is the number of i "
        "with values[i] == b, int32 of shape (bins)."
    ),
    params=(
        Param("values", "in", "int32", "n"),
        Param("counts", "out", "int32", "bins"),
        Param("n", "scalar", "int32", "n"),
        Param("bins", "scalar", "int32", "bins"),
    ),
    variables=("n", "bins"),
    sizes=({"n": 10, "bins": 7}, {"n": 10000, "bins": 100}, {"n": 1 << 24, "bins": 1024}),
    make_inputs=_histogram_inputs,
    compute=lambda i, s: {"counts": torch.bincount(i["values"], minlength=s["bins"]).to(torch.int32)},
    atol=0.0,  # integer counts
    rtol=0.0,
    solution=load_solution("histogram_i32.cu"),
)

TASKS = (EMBEDDING_GATHER_F16, GATHER_COLS_F32, SCATTER_ADD_F32, HISTOGRAM_I32)

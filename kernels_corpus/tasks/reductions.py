"""Reduction and scan tasks: whole-vector sum and max, row and column sums, row argmax, row-wise
inclusive scans.

Tolerances follow the reduction length L and the data: inputs are O(1), so an fp32 sum of L terms in
any reasonable order (tree, or per-thread chunks then tree) has an error of roughly u * sqrt(L) *
|partial sums| with u = 2^-24 ~ 6e-8; the atol values below allow ~10x that at the largest L, while a
result computed in fp16 or with a term dropped is far outside. Max, argmax and integer scans are exact.
"""

from __future__ import annotations

import torch

from .base import KernelTask, Param, load_solution, normal, randint, uniform

_ROW_SIZES = ({"rows": 3, "cols": 37}, {"rows": 300, "cols": 1000}, {"rows": 8192, "cols": 4096})
_ROWS_COLS = (Param("rows", "scalar", "int32", "rows"), Param("cols", "scalar", "int32", "cols"))


# ----------------------------------------------------------------------------- sum_f32

SUM_F32 = KernelTask(
    name="sum_f32",
    description=(
        "Sum all n elements of a float32 vector x into out[0] (out has exactly one element). "
        "Accumulate in float32 or better."
    ),
    params=(Param("x", "in", "float32", "n"), Param("out", "out", "float32", "1"), Param("n", "scalar", "int32", "n")),
    variables=("n",),
    sizes=({"n": 1000}, {"n": 100003}, {"n": 1 << 24}),
    make_inputs=lambda s, g: {"x": uniform(g, (s["n"],), -1.0, 1.0)},
    compute=lambda i, s: {"out": i["x"].sum().reshape(1)},
    # L = 16M, |sum| ~ 2.4e3: a tree sum errs ~1e-3 at most; a single sequential fp32 accumulator errs
    # ~0.5 and is rejected (it would also be far too slow to matter).
    atol=2e-2,
    rtol=1e-5,
    solution=load_solution("sum_f32.cu"),
)


# ----------------------------------------------------------------------------- max_f32

MAX_F32 = KernelTask(
    name="max_f32",
    description="Maximum of all n elements of a float32 vector x, written to out[0] (out has exactly one element).",
    params=(Param("x", "in", "float32", "n"), Param("out", "out", "float32", "1"), Param("n", "scalar", "int32", "n")),
    variables=("n",),
    sizes=({"n": 1000}, {"n": 100003}, {"n": 1 << 24}),
    make_inputs=lambda s, g: {"x": normal(g, (s["n"],), std=10.0, mean=-5.0)},
    compute=lambda i, s: {"out": i["x"].max().reshape(1)},
    atol=0.0,  # max is exact
    rtol=0.0,
    solution=load_solution("max_f32.cu"),
)


# ----------------------------------------------------------------------------- row_sum_f32

ROW_SUM_F32 = KernelTask(
    name="row_sum_f32",
    description="Row sums of a float32 matrix x of shape (rows, cols), row-major: out[r] = sum over c of x[r, c].",
    params=(Param("x", "in", "float32", "rows, cols"), Param("out", "out", "float32", "rows")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=_ROW_SIZES,
    make_inputs=lambda s, g: {"x": uniform(g, (s["rows"], s["cols"]), -1.0, 1.0)},
    compute=lambda i, s: {"out": i["x"].sum(dim=1)},
    atol=1e-3,  # L <= 4096, |sum| ~ 40: ~1e-5 typical error
    rtol=1e-5,
    solution=load_solution("row_sum_f32.cu"),
)


# ----------------------------------------------------------------------------- col_sum_f32

COL_SUM_F32 = KernelTask(
    name="col_sum_f32",
    description=(
        "Column sums of a float32 matrix x of shape (rows, cols), row-major: out[c] = sum over r of x[r, c]."
    ),
    params=(Param("x", "in", "float32", "rows, cols"), Param("out", "out", "float32", "cols")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 37, "cols": 3}, {"rows": 1000, "cols": 300}, {"rows": 8192, "cols": 4096}),
    make_inputs=lambda s, g: {"x": normal(g, (s["rows"], s["cols"]))},
    compute=lambda i, s: {"out": i["x"].sum(dim=0)},
    # L <= 8192, |sum| ~ 90: even one sequential accumulator errs ~3e-4.
    atol=2e-3,
    rtol=1e-5,
    solution=load_solution("col_sum_f32.cu"),
)


# ----------------------------------------------------------------------------- argmax_rows_f32

ARGMAX_ROWS_F32 = KernelTask(
    name="argmax_rows_f32",
    description=(
        "Index of the maximum of each row of a float32 matrix x of shape (rows, cols), row-major: idx[r] is the "
        "column of the largest x[r, c], the smallest such column on ties. idx is int32 of shape (rows)."
    ),
    params=(Param("x", "in", "float32", "rows, cols"), Param("idx", "out", "int32", "rows")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=_ROW_SIZES,
    make_inputs=lambda s, g: {"x": normal(g, (s["rows"], s["cols"]))},
    compute=lambda i, s: {"idx": i["x"].argmax(dim=1).to(torch.int32)},
    atol=0.0,  # an index is right or wrong
    rtol=0.0,
    solution=load_solution("argmax_rows_f32.cu"),
)


# ----------------------------------------------------------------------------- cumsum_rows_f32

CUMSUM_ROWS_F32 = KernelTask(
    name="cumsum_rows_f32",
    description=(
        "Inclusive prefix sum along each row of a float32 matrix x of shape (rows, cols), row-major: "
        "y[r, c] = x[r, 0] + x[r, 1] + ... + x[r, c]. y is float32 (rows, cols)."
    ),
    params=(Param("x", "in", "float32", "rows, cols"), Param("y", "out", "float32", "rows, cols")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 100, "cols": 5000}, {"rows": 4096, "cols": 4096}),
    make_inputs=lambda s, g: {"x": uniform(g, (s["rows"], s["cols"]), -1.0, 2.0)},
    compute=lambda i, s: {"y": torch.cumsum(i["x"], dim=1)},
    # Mean 0.5 makes prefixes grow to ~2500, so rtol carries the check; a sequential fp32 prefix errs
    # ~u * sqrt(L) * |prefix| ~ 1e-5 relative at L = 5000.
    atol=1e-3,
    rtol=1e-4,
    solution=load_solution("cumsum_rows_f32.cu"),
)


# ----------------------------------------------------------------------------- cumsum_rows_i32

CUMSUM_ROWS_I32 = KernelTask(
    name="cumsum_rows_i32",
    description=(
        "Inclusive prefix sum along each row of an int32 matrix x of shape (rows, cols), row-major: "
        "y[r, c] = x[r, 0] + ... + x[r, c], in int32 (the values never overflow). y is int32 (rows, cols)."
    ),
    params=(Param("x", "in", "int32", "rows, cols"), Param("y", "out", "int32", "rows, cols")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 100, "cols": 5000}, {"rows": 4096, "cols": 4096}),
    # |prefix| <= 1000 * 5000 fits int32 with room to spare.
    make_inputs=lambda s, g: {"x": randint(g, (s["rows"], s["cols"]), -1000, 1001, torch.int32)},
    compute=lambda i, s: {"y": torch.cumsum(i["x"], dim=1).to(i["x"].dtype)},
    atol=0.0,  # integer arithmetic is exact
    rtol=0.0,
    solution=load_solution("cumsum_rows_i32.cu"),
)

TASKS = (SUM_F32, MAX_F32, ROW_SUM_F32, COL_SUM_F32, ARGMAX_ROWS_F32, CUMSUM_ROWS_F32, CUMSUM_ROWS_I32)

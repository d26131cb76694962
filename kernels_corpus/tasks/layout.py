"""Data-movement tasks: transposes and permutes. Pure copies, so the results must be bit-exact
(atol = rtol = 0); the whole difficulty is coalescing both the reads and the writes.
"""

from __future__ import annotations

import torch

from .base import KernelTask, Param, load_solution, normal

TRANSPOSE_F32 = KernelTask(
    name="transpose_f32",
    description=(
        "Transpose a float32 matrix: x has shape (rows, cols), row-major; y has shape (cols, rows), row-major, "
        "with y[c, r] = x[r, c]."
    ),
    params=(
        Param("x", "in", "float32", "rows, cols"),
        Param("y", "out", "float32", "cols, rows"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
    ),
    variables=("rows", "cols"),
    sizes=({"rows": 5, "cols": 37}, {"rows": 300, "cols": 1000}, {"rows": 4096, "cols": 8192}),
    make_inputs=lambda s, g: {"x": normal(g, (s["rows"], s["cols"]))},
    compute=lambda i, s: {"y": i["x"].t().contiguous()},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("transpose_f32.cu"),
)

BATCHED_TRANSPOSE_F16 = KernelTask(
    name="batched_transpose_f16",
    description=(
        "Transpose each matrix of a float16 batch: x has shape (batch, rows, cols), row-major; y has shape "
        "(batch, cols, rows), with y[b, c, r] = x[b, r, c]."
    ),
    params=(
        Param("x", "in", "float16", "batch, rows, cols"),
        Param("y", "out", "float16", "batch, cols, rows"),
        Param("batch", "scalar", "int32", "batch"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
    ),
    variables=("batch", "rows", "cols"),
    sizes=({"batch": 2, "rows": 5, "cols": 37}, {"batch": 8, "rows": 100, "cols": 300}, {"batch": 32, "rows": 1024, "cols": 1024}),
    make_inputs=lambda s, g: {"x": normal(g, (s["batch"], s["rows"], s["cols"]), dtype=torch.float16)},
    compute=lambda i, s: {"y": i["x"].transpose(1, 2).contiguous()},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("batched_transpose_f16.cu"),
)

PERMUTE_0213_F16 = KernelTask(
    name="permute_0213_f16",
    description=(
        "Swap the sequence and head axes of a float16 tensor (the attention head split): x has shape "
        "(batch, seq, heads, dim), contiguous; y has shape (batch, heads, seq, dim), contiguous, with "
        "y[b, k, s, d] = x[b, s, k, d]."
    ),
    params=(
        Param("x", "in", "float16", "batch, seq, heads, dim"),
        Param("y", "out", "float16", "batch, heads, seq, dim"),
        Param("batch", "scalar", "int32", "batch"),
        Param("seq", "scalar", "int32", "seq"),
        Param("heads", "scalar", "int32", "heads"),
        Param("dim", "scalar", "int32", "dim"),
    ),
    variables=("batch", "seq", "heads", "dim"),
    sizes=(
        {"batch": 1, "seq": 5, "heads": 3, "dim": 7},
        {"batch": 2, "seq": 128, "heads": 8, "dim": 64},
        {"batch": 8, "seq": 2048, "heads": 16, "dim": 128},
    ),
    make_inputs=lambda s, g: {"x": normal(g, (s["batch"], s["seq"], s["heads"], s["dim"]), dtype=torch.float16)},
    compute=lambda i, s: {"y": i["x"].permute(0, 2, 1, 3).contiguous()},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("permute_0213_f16.cu"),
)

NCHW_TO_NHWC_F32 = KernelTask(
    name="nchw_to_nhwc_f32",
    description=(
        "Convert a float32 image batch from NCHW to NHWC layout: x has shape (batch, channels, height, width), "
        "contiguous; y has shape (batch, height, width, channels), contiguous, with y[b, i, j, c] = x[b, c, i, j]."
    ),
    params=(
        Param("x", "in", "float32", "batch, channels, height, width"),
        Param("y", "out", "float32", "batch, height, width, channels"),
        Param("batch", "scalar", "int32", "batch"),
        Param("channels", "scalar", "int32", "channels"),
        Param("height", "scalar", "int32", "height"),
        Param("width", "scalar", "int32", "width"),
    ),
    variables=("batch", "channels", "height", "width"),
    sizes=(
        {"batch": 1, "channels": 3, "height": 5, "width": 7},
        {"batch": 2, "channels": 64, "height": 28, "width": 28},
        {"batch": 32, "channels": 256, "height": 56, "width": 56},
    ),
    make_inputs=lambda s, g: {"x": normal(g, (s["batch"], s["channels"], s["height"], s["width"]))},
    compute=lambda i, s: {"y": i["x"].permute(0, 2, 3, 1).contiguous()},
    atol=0.0,
    rtol=0.0,
    solution=load_solution("nchw_to_nhwc_f32.cu"),
)

TASKS = (TRANSPOSE_F32, BATCHED_TRANSPOSE_F16, PERMUTE_0213_F16, NCHW_TO_NHWC_F32)

"""Linear-algebra tasks: matrix-vector products (bandwidth-bound) and small GEMMs (compute-bound),
in fp32 and fp16, including an nn.Linear with fused bias and ReLU.

Tolerances: inputs are U(-1, 1), so a dot product of length K has |result| ~ sqrt(K / 9) (~10 at K =
1024). fp32 accumulation errs ~u * sqrt(K) * |result| ~ 2e-5 there; atol/rtol 1e-4 accept any fp32
summation order but reject TF32 tensor cores (10-bit mantissa, ~1e-2 absolute at K = 1024), which
the fp32 descriptions rule out. fp16 outputs are rounded to 11 bits (half-ulp 2^-12 relative, up to
~4e-3 absolute near 10); rtol and atol 1e-2 admit fp32 accumulation in any order, while fp16
accumulation over K ~ 1000 (error ~sqrt(K) half-ulps of a running sum near 10, ~0.1) fails on many
elements.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import KernelTask, Param, load_solution, uniform

_GEMV_SIZES = ({"rows": 3, "cols": 37}, {"rows": 1000, "cols": 300}, {"rows": 8192, "cols": 8192})
_GEMM_SIZES = ({"M": 33, "N": 47, "K": 29}, {"M": 256, "N": 384, "K": 200}, {"M": 1024, "N": 1024, "K": 1024})
_GEMM_SIZES_F16 = ({"M": 33, "N": 47, "K": 29}, {"M": 256, "N": 384, "K": 200}, {"M": 2048, "N": 2048, "K": 1024})
_MNK = tuple(Param(v, "scalar", "int32", v) for v in ("M", "N", "K"))


def _gemv_inputs(dtype):
    return lambda s, g: {
        "A": uniform(g, (s["rows"], s["cols"]), dtype=dtype),
        "x": uniform(g, (s["cols"],), dtype=dtype),
    }


def _gemm_inputs(dtype):
    return lambda s, g: {
        "A": uniform(g, (s["M"], s["K"]), dtype=dtype),
        "B": uniform(g, (s["K"], s["N"]), dtype=dtype),
    }


GEMV_F32 = KernelTask(
    name="gemv_f32",
    description=(
        "Matrix-vector product in float32: A has shape (rows, cols), row-major; x has shape (cols); "
        "y[r] = sum over c of A[r, c] * x[c], float32 of shape (rows)."
    ),
    params=(
        Param("A", "in", "float32", "rows, cols"),
        Param("x", "in", "float32", "cols"),
        Param("y", "out", "float32", "rows"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
    ),
    variables=("rows", "cols"),
    sizes=_GEMV_SIZES,
    make_inputs=_gemv_inputs(torch.float32),
    compute=lambda i, s: {"y": i["A"] @ i["x"]},
    atol=1e-4,
    rtol=1e-4,
    solution=load_solution("gemv_f32.cu"),
)

GEMV_F16 = KernelTask(
    name="gemv_f16",
    description=(
        "Matrix-vector product in float16 with float32 accumulation: A has shape (rows, cols), row-major; "
        "x has shape (cols); y[r] = sum over c of A[r, c] * x[c], float16 of shape (rows)."
    ),
    params=(
        Param("A", "in", "float16", "rows, cols"),
        Param("x", "in", "float16", "cols"),
        Param("y", "out", "float16", "rows"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
    ),
    variables=("rows", "cols"),
    sizes=_GEMV_SIZES,
    make_inputs=_gemv_inputs(torch.float16),
    compute=lambda i, s: {"y": i["A"] @ i["x"]},
    # |y| ~ 30 at cols = 8192, where a half-ulp is 1.6e-2: rtol 1e-2 covers the output rounding.
    atol=1e-2,
    rtol=1e-2,
    solution=load_solution("gemv_f16.cu"),
)

GEMM_F32 = KernelTask(
    name="gemm_f32",
    description=(
        "Matrix product in float32, C = A B: A is (M, K), B is (K, N), C is (M, N), all row-major. "
        "Full float32 accuracy: multiply and accumulate in float32, not TF32."
    ),
    params=(
        Param("A", "in", "float32", "M, K"),
        Param("B", "in", "float32", "K, N"),
        Param("C", "out", "float32", "M, N"),
    ) + _MNK,
    variables=("M", "N", "K"),
    sizes=_GEMM_SIZES,
    make_inputs=_gemm_inputs(torch.float32),
    compute=lambda i, s: {"C": i["A"] @ i["B"]},
    atol=1e-4,
    rtol=1e-4,
    solution=load_solution("gemm_f32.cu"),
)

GEMM_F16 = KernelTask(
    name="gemm_f16",
    description=(
        "Matrix product in float16 with float32 accumulation, C = A B: A is (M, K), B is (K, N), C is (M, N), "
        "all float16 and row-major. M, N and K need not be multiples of anything."
    ),
    params=(
        Param("A", "in", "float16", "M, K"),
        Param("B", "in", "float16", "K, N"),
        Param("C", "out", "float16", "M, N"),
    ) + _MNK,
    variables=("M", "N", "K"),
    sizes=_GEMM_SIZES_F16,
    make_inputs=_gemm_inputs(torch.float16),
    compute=lambda i, s: {"C": i["A"] @ i["B"]},
    atol=1e-2,
    rtol=1e-2,
    solution=load_solution("gemm_f16.cu"),
)


def _linear_inputs(s, g):
    return {
        "x": uniform(g, (s["M"], s["K"]), dtype=torch.float16),
        "W": uniform(g, (s["N"], s["K"]), dtype=torch.float16),
        "bias": uniform(g, (s["N"],), -2.0, 2.0, dtype=torch.float16),
    }


LINEAR_BIAS_RELU_F16 = KernelTask(
    name="linear_bias_relu_f16",
    description=(
        "A linear layer with fused bias and ReLU in float16 with float32 accumulation: x is (M, K), the weight W "
        "is (N, K) (nn.Linear layout, so the product uses W transposed), bias is (N), all float16 row-major; "
        "y[m, n] = max(0, sum over k of x[m, k] * W[n, k] + bias[n]), float16 of shape (M, N)."
    ),
    params=(
        Param("x", "in", "float16", "M, K"),
        Param("W", "in", "float16", "N, K"),
        Param("bias", "in", "float16", "N"),
        Param("y", "out", "float16", "M, N"),
    ) + _MNK,
    variables=("M", "N", "K"),
    sizes=({"M": 33, "N": 47, "K": 29}, {"M": 128, "N": 384, "K": 256}, {"M": 4096, "N": 2048, "K": 1024}),
    make_inputs=_linear_inputs,
    compute=lambda i, s: {"y": torch.relu(F.linear(i["x"], i["W"], i["bias"]))},
    atol=1e-2,
    rtol=1e-2,
    solution=load_solution("linear_bias_relu_f16.cu"),
)

TASKS = (GEMV_F32, GEMV_F16, GEMM_F32, GEMM_F16, LINEAR_BIAS_RELU_F16)

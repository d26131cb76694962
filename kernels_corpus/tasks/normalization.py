"""Row-wise normalization tasks: softmax, layer norm, RMS norm, cross-entropy. One row is one
independent reduction followed by an elementwise pass.

Tolerances: statistics are fp32 sums over L <= 8192 O(1) terms (relative error ~u * sqrt(L) ~ 1e-5
when computed in fp32); exp/log/rsqrt add a few ulp. fp32 outputs therefore use rtol ~1e-4 with a
small atol for near-zero values. fp16 outputs are dominated by the final rounding (2^-12 relative);
rtol 4e-3 (~16 half-ulps) leaves room for any sound order of fp32 operations and for torch's own
fp16 kernels, while statistics accumulated in fp16 over thousands of terms drift well past it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import KernelTask, Param, load_solution, normal, randint, uniform

EPS = 1e-5
_ROWS_COLS = (Param("rows", "scalar", "int32", "rows"), Param("cols", "scalar", "int32", "cols"))


# ----------------------------------------------------------------------------- softmax

def _softmax_inputs(dtype):
    # Spread 3 makes a few entries dominate each row, so a wrong normalisation shows; offset 5 puts the
    # row max near 17, where exp of the raw value overflows fp16 (e^11 > 65504) unless the max is
    # subtracted first.
    return lambda s, g: {"x": normal(g, (s["rows"], s["cols"]), std=3.0, mean=5.0, dtype=dtype)}


SOFTMAX_ROWS_F32 = KernelTask(
    name="softmax_rows_f32",
    description=(
        "Softmax along each row of a float32 matrix x of shape (rows, cols), row-major: "
        "y[r, c] = exp(x[r, c]) / sum over k of exp(x[r, k]). y is float32 (rows, cols)."
    ),
    params=(Param("x", "in", "float32", "rows, cols"), Param("y", "out", "float32", "rows, cols")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 200, "cols": 1000}, {"rows": 4096, "cols": 4096}),
    make_inputs=_softmax_inputs(torch.float32),
    compute=lambda i, s: {"y": torch.softmax(i["x"], dim=1)},
    atol=1e-6,  # outputs are as small as ~1e-10; exp and the sum give ~1e-6 relative error at most
    rtol=1e-4,
    solution=load_solution("softmax_rows_f32.cu"),
)

SOFTMAX_ROWS_F16 = KernelTask(
    name="softmax_rows_f16",
    description=(
        "Softmax along each row of a float16 matrix x of shape (rows, cols), row-major: "
        "y[r, c] = exp(x[r, c]) / sum over k of exp(x[r, k]). y is float16 (rows, cols)."
    ),
    params=(Param("x", "in", "float16", "rows, cols"), Param("y", "out", "float16", "rows, cols")) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 300, "cols": 1000}, {"rows": 8192, "cols": 2048}),
    make_inputs=_softmax_inputs(torch.float16),
    compute=lambda i, s: {"y": torch.softmax(i["x"], dim=1)},
    atol=1e-5,  # fp16 subnormal outputs (< 6e-5) have an absolute step of 6e-8; 1e-5 is generous
    rtol=4e-3,
    solution=load_solution("softmax_rows_f16.cu"),
)


# ----------------------------------------------------------------------------- layer norm

def _layernorm_inputs(dtype):
    def make(s, g):
        # Offset mean 3 with std 2: a one-pass E[x^2] - E[x]^2 in fp16 would lose digits.
        return {
            "x": normal(g, (s["rows"], s["cols"]), std=2.0, mean=3.0, dtype=dtype),
            "weight": uniform(g, (s["cols"],), 0.5, 1.5, dtype=dtype),
            "bias": uniform(g, (s["cols"],), -0.5, 0.5, dtype=dtype),
        }

    return make


def _layernorm(i, s):
    return {"y": F.layer_norm(i["x"], (s["cols"],), i["weight"], i["bias"], EPS)}


def _layernorm_params(dtype):
    return (
        Param("x", "in", dtype, "rows, cols"),
        Param("weight", "in", dtype, "cols"),
        Param("bias", "in", dtype, "cols"),
        Param("y", "out", dtype, "rows, cols"),
        Param("eps", "scalar", "float32", repr(EPS)),
    ) + _ROWS_COLS


_LAYERNORM_TEXT = (
    "Layer normalization of each row of a {t} matrix x of shape (rows, cols), row-major, with {t} weight and bias "
    "of shape (cols): with mean and (biased) variance var of row r, "
    "y[r, c] = (x[r, c] - mean) / sqrt(var + eps) * weight[c] + bias[c]. y is {t} (rows, cols).{extra}"
)

LAYERNORM_F32 = KernelTask(
    name="layernorm_f32",
    description=_LAYERNORM_TEXT.format(t="float32", extra=""),
    params=_layernorm_params("float32"),
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 256, "cols": 1024}, {"rows": 8192, "cols": 4096}),
    make_inputs=_layernorm_inputs(torch.float32),
    compute=_layernorm,
    atol=1e-4,  # outputs ~N(0, 1) * weight: fp32 statistics over 4096 terms give ~1e-6
    rtol=1e-4,
    solution=load_solution("layernorm_f32.cu"),
)

LAYERNORM_F16 = KernelTask(
    name="layernorm_f16",
    description=_LAYERNORM_TEXT.format(t="float16", extra=" Compute the statistics in float32."),
    params=_layernorm_params("float16"),
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 256, "cols": 1024}, {"rows": 8192, "cols": 4096}),
    make_inputs=_layernorm_inputs(torch.float16),
    compute=_layernorm,
    atol=4e-3,  # |y| up to ~6: fp16 output rounding is up to ~2e-3 absolute
    rtol=4e-3,
    solution=load_solution("layernorm_f16.cu"),
)


# ----------------------------------------------------------------------------- rms norm

RMSNORM_F16 = KernelTask(
    name="rmsnorm_f16",
    description=(
        "RMS normalization of each row of a float16 matrix x of shape (rows, cols), row-major, with a float16 "
        "weight of shape (cols): y[r, c] = x[r, c] / sqrt(mean over k of x[r, k]^2 + eps) * weight[c]. "
        "y is float16 (rows, cols). Compute the mean of squares in float32."
    ),
    params=(
        Param("x", "in", "float16", "rows, cols"),
        Param("weight", "in", "float16", "cols"),
        Param("y", "out", "float16", "rows, cols"),
        Param("eps", "scalar", "float32", repr(EPS)),
    ) + _ROWS_COLS,
    variables=("rows", "cols"),
    sizes=({"rows": 3, "cols": 37}, {"rows": 256, "cols": 1024}, {"rows": 16384, "cols": 4096}),
    make_inputs=lambda s, g: {
        "x": normal(g, (s["rows"], s["cols"]), std=4.0, dtype=torch.float16),
        "weight": uniform(g, (s["cols"],), 0.5, 1.5, dtype=torch.float16),
    },
    compute=lambda i, s: {"y": F.rms_norm(i["x"], (s["cols"],), i["weight"], EPS)},
    atol=4e-3,  # |y| up to ~6: fp16 output rounding
    rtol=4e-3,
    solution=load_solution("rmsnorm_f16.cu"),
)


# ----------------------------------------------------------------------------- cross-entropy

CROSS_ENTROPY_ROWS_F32 = KernelTask(
    name="cross_entropy_rows_f32",
    description=(
        "Per-row cross-entropy loss. logits is float32 of shape (rows, classes), row-major; target is int64 of "
        "shape (rows) with values in [0, classes). loss[r] = log(sum over c of exp(logits[r, c])) - "
        "logits[r, target[r]], float32 of shape (rows). Keep it stable for large logits."
    ),
    params=(
        Param("logits", "in", "float32", "rows, classes"),
        Param("target", "in", "int64", "rows"),
        Param("loss", "out", "float32", "rows"),
        Param("rows", "scalar", "int32", "rows"),
        Param("classes", "scalar", "int32", "classes"),
    ),
    variables=("rows", "classes"),
    sizes=({"rows": 3, "classes": 37}, {"rows": 128, "classes": 1000}, {"rows": 1024, "classes": 32000}),
    make_inputs=lambda s, g: {
        # Offset 80: exp of a raw logit overflows fp32 beyond ~88, so only the max-subtracted form
        # works; std 4 keeps the loss well away from zero.
        "logits": normal(g, (s["rows"], s["classes"]), std=4.0, mean=80.0),
        "target": randint(g, (s["rows"],), 0, s["classes"]),
    },
    compute=lambda i, s: {"loss": F.cross_entropy(i["logits"], i["target"], reduction="none")},
    atol=2e-4,  # m + log(s) - x[t] cancels around 80-100 where an fp32 ulp is 7.6e-6
    rtol=1e-5,
    solution=load_solution("cross_entropy_rows_f32.cu"),
)

TASKS = (
    SOFTMAX_ROWS_F32,
    SOFTMAX_ROWS_F16,
    LAYERNORM_F32,
    LAYERNORM_F16,
    RMSNORM_F16,
    CROSS_ENTROPY_ROWS_F32,
)

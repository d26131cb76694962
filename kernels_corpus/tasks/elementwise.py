"""Elementwise and activation tasks: memory-bound, one output per input element.

Large sizes move >= ~64 MB, i.e. >= ~13 us at the H200's ~4.8 TB/s, so they can be timed.
Tolerances: an fp32 elementwise op is a handful of correctly rounded steps, so its error is a few ulp
(rtol 1e-5); transcendental functions (erff, expf, tanhf) add ~2 ulp more. fp16 outputs are rounded
once to 11 significant bits (half-ulp 2^-12 ~ 2.4e-4 relative); rtol 4e-3 (~16 ulp) leaves room for a
kernel that computes in fp16 arithmetic or applies an intermediate rounding (as torch's native fp16
baseline does for x + bias), and atol covers outputs near zero where relative error is meaningless.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import KernelTask, Param, load_solution, normal, opmath, uniform

_N_SIZES = ({"n": 1000}, {"n": 65537}, {"n": 1 << 24})


# ----------------------------------------------------------------------------- vector_add_f32

def _add_inputs(s, g):
    return {"x": normal(g, (s["n"],)), "y": uniform(g, (s["n"],), -2.0, 2.0)}


VECTOR_ADD_F32 = KernelTask(
    name="vector_add_f32",
    description="Add two float32 vectors elementwise: out[i] = x[i] + y[i] for i < n.",
    params=(
        Param("x", "in", "float32", "n"),
        Param("y", "in", "float32", "n"),
        Param("out", "out", "float32", "n"),
        Param("n", "scalar", "int32", "n"),
    ),
    variables=("n",),
    sizes=_N_SIZES,
    make_inputs=_add_inputs,
    compute=lambda i, s: {"out": i["x"] + i["y"]},
    atol=1e-6,  # one correctly rounded add: exact up to half an ulp
    rtol=1e-6,
    solution=load_solution("vector_add_f32.cu"),
)


# ----------------------------------------------------------------------------- relu_f32

RELU_F32 = KernelTask(
    name="relu_f32",
    description="ReLU on a float32 vector: y[i] = max(x[i], 0) for i < n.",
    params=(Param("x", "in", "float32", "n"), Param("y", "out", "float32", "n"), Param("n", "scalar", "int32", "n")),
    variables=("n",),
    sizes=_N_SIZES,
    make_inputs=lambda s, g: {"x": normal(g, (s["n"],), std=2.0)},
    compute=lambda i, s: {"y": torch.relu(i["x"])},
    atol=0.0,  # max with zero is exact
    rtol=0.0,
    solution=load_solution("relu_f32.cu"),
)


# ----------------------------------------------------------------------------- gelu_f32

GELU_F32 = KernelTask(
    name="gelu_f32",
    description=(
        "Exact (erf-based) GELU on a float32 vector: y[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2))) for i < n. "
        "Not the tanh approximation."
    ),
    params=(Param("x", "in", "float32", "n"), Param("y", "out", "float32", "n"), Param("n", "scalar", "int32", "n")),
    variables=("n",),
    sizes=_N_SIZES,
    make_inputs=lambda s, g: {"x": normal(g, (s["n"],), std=3.0)},
    compute=lambda i, s: {"y": F.gelu(i["x"])},
    # erff is within ~2 ulp; a few fp32 roundings more. For x << 0, 1 + erf(x) cancels, leaving an
    # absolute error ~0.5 |x| u ~ 1e-6 at |x| ~ 15 (std 3 over 16M samples). The tanh approximation
    # differs by up to ~5e-4 and is rejected.
    atol=4e-6,
    rtol=1e-5,
    solution=load_solution("gelu_f32.cu"),
)


# ----------------------------------------------------------------------------- silu_f16

SILU_F16 = KernelTask(
    name="silu_f16",
    description="SiLU (swish) on a float16 vector: y[i] = x[i] / (1 + exp(-x[i])) for i < n, float16 in and out.",
    params=(Param("x", "in", "float16", "n"), Param("y", "out", "float16", "n"), Param("n", "scalar", "int32", "n")),
    variables=("n",),
    sizes=({"n": 999}, {"n": 65537}, {"n": 1 << 25}),
    make_inputs=lambda s, g: {"x": normal(g, (s["n"],), std=3.0, dtype=torch.float16)},
    compute=lambda i, s: {"y": F.silu(i["x"])},
    atol=1e-3,  # fp16 output rounding, see module docstring
    rtol=4e-3,
    solution=load_solution("silu_f16.cu"),
)


# ----------------------------------------------------------------------------- bias_gelu_f16

def _bias_gelu_inputs(s, g):
    return {
        "x": normal(g, (s["rows"], s["cols"]), std=2.0, dtype=torch.float16),
        "bias": uniform(g, (s["cols"],), -1.0, 1.0, dtype=torch.float16),
    }


BIAS_GELU_F16 = KernelTask(
    name="bias_gelu_f16",
    description=(
        "Fused bias add and tanh-approximation GELU on a float16 matrix x of shape (rows, cols), row-major, "
        "with a float16 bias of shape (cols): with v = x[r, c] + bias[c], "
        "y[r, c] = 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v^3))). Output float16 (rows, cols)."
    ),
    params=(
        Param("x", "in", "float16", "rows, cols"),
        Param("bias", "in", "float16", "cols"),
        Param("y", "out", "float16", "rows, cols"),
        Param("rows", "scalar", "int32", "rows"),
        Param("cols", "scalar", "int32", "cols"),
    ),
    variables=("rows", "cols"),
    sizes=({"rows": 7, "cols": 129}, {"rows": 300, "cols": 1000}, {"rows": 8192, "cols": 4096}),
    make_inputs=_bias_gelu_inputs,
    compute=lambda i, s: {"y": F.gelu(i["x"] + i["bias"], approximate="tanh")},
    atol=2e-3,  # fp16 output rounding plus torch's fp16 rounding of x + bias (gelu' <= 1.13)
    rtol=4e-3,
    solution=load_solution("bias_gelu_f16.cu"),
)


# ----------------------------------------------------------------------------- axpby_f32

AXPBY_ALPHA = 1.5
AXPBY_BETA = -0.75

AXPBY_F32 = KernelTask(
    name="axpby_f32",
    description=(
        "Scaled vector sum in float32: out[i] = alpha * x[i] + beta * y[i] for i < n, with alpha and beta "
        "float scalars passed by value."
    ),
    params=(
        Param("x", "in", "float32", "n"),
        Param("y", "in", "float32", "n"),
        Param("out", "out", "float32", "n"),
        Param("alpha", "scalar", "float32", repr(AXPBY_ALPHA)),
        Param("beta", "scalar", "float32", repr(AXPBY_BETA)),
        Param("n", "scalar", "int32", "n"),
    ),
    variables=("n",),
    sizes=_N_SIZES,
    make_inputs=lambda s, g: {"x": uniform(g, (s["n"],)), "y": normal(g, (s["n"],))},
    compute=lambda i, s: {"out": AXPBY_ALPHA * i["x"] + AXPBY_BETA * i["y"]},
    atol=1e-6,  # two products and a sum (or one fma): a couple of ulp
    rtol=1e-5,
    solution=load_solution("axpby_f32.cu"),
)


# ----------------------------------------------------------------------------- swiglu_f16

def _swiglu(i, s):
    x = i["x"]
    gate, up = x[:, : s["hidden"]], x[:, s["hidden"]:]
    return {"out": (F.silu(opmath(gate)) * opmath(up)).to(x.dtype)}


SWIGLU_F16 = KernelTask(
    name="swiglu_f16",
    description=(
        "SwiGLU activation on float16: x has shape (rows, 2 * hidden), row-major; the first hidden columns of "
        "each row are the gate g, the last hidden columns the up-projection u. "
        "out[r, j] = silu(g[r, j]) * u[r, j] with silu(v) = v / (1 + exp(-v)); out is float16 (rows, hidden)."
    ),
    params=(
        Param("x", "in", "float16", "rows, 2 * hidden"),
        Param("out", "out", "float16", "rows, hidden"),
        Param("rows", "scalar", "int32", "rows"),
        Param("hidden", "scalar", "int32", "hidden"),
    ),
    variables=("rows", "hidden"),
    sizes=({"rows": 5, "hidden": 77}, {"rows": 256, "hidden": 1376}, {"rows": 4096, "hidden": 4096}),
    make_inputs=lambda s, g: {"x": normal(g, (s["rows"], 2 * s["hidden"]), std=2.0, dtype=torch.float16)},
    compute=_swiglu,
    atol=2e-3,  # fp16 output rounding of a product of magnitude up to ~50
    rtol=4e-3,
    solution=load_solution("swiglu_f16.cu"),
)


# ----------------------------------------------------------------------------- rope_f16

def _rope_inputs(s, g):
    seq, heads, dim = s["seq"], s["heads"], s["dim"]
    # Real rotary tables: angle = position * base^(-2j / dim); the kernel just reads them.
    inv_freq = 10000.0 ** (-torch.arange(0, dim // 2, dtype=torch.float64) * 2 / dim)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return {
        "x": normal(g, (seq, heads, dim), dtype=torch.float16),
        "cos_t": angle.cos().float(),
        "sin_t": angle.sin().float(),
    }


def _rope(i, s):
    x = i["x"]
    half = s["dim"] // 2
    xf = opmath(x)
    cos, sin = i["cos_t"][:, None, :].to(xf.dtype), i["sin_t"][:, None, :].to(xf.dtype)
    a, b = xf[..., :half], xf[..., half:]
    return {"out": torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(x.dtype)}


ROPE_F16 = KernelTask(
    name="rope_f16",
    description=(
        "Rotary position embedding (rotate-half convention) on float16 x of shape (seq, heads, dim), dim even, "
        "with float32 tables cos_t and sin_t of shape (seq, dim / 2). With h = dim / 2 and j < h: "
        "out[s, k, j] = x[s, k, j] * cos_t[s, j] - x[s, k, j + h] * sin_t[s, j] and "
        "out[s, k, j + h] = x[s, k, j + h] * cos_t[s, j] + x[s, k, j] * sin_t[s, j]. out is float16 (seq, heads, dim)."
    ),
    params=(
        Param("x", "in", "float16", "seq, heads, dim"),
        Param("cos_t", "in", "float32", "seq, dim // 2"),
        Param("sin_t", "in", "float32", "seq, dim // 2"),
        Param("out", "out", "float16", "seq, heads, dim"),
        Param("seq", "scalar", "int32", "seq"),
        Param("heads", "scalar", "int32", "heads"),
        Param("dim", "scalar", "int32", "dim"),
    ),
    variables=("seq", "heads", "dim"),
    sizes=({"seq": 5, "heads": 3, "dim": 34}, {"seq": 128, "heads": 8, "dim": 64}, {"seq": 4096, "heads": 32, "dim": 128}),
    make_inputs=_rope_inputs,
    compute=_rope,
    atol=2e-3,  # |out| <= sqrt(2) max|x|; fp16 output rounding dominates
    rtol=4e-3,
    solution=load_solution("rope_f16.cu"),
)

TASKS = (VECTOR_ADD_F32, RELU_F32, GELU_F32, SILU_F16, BIAS_GELU_F16, AXPBY_F32, SWIGLU_F16, ROPE_F16)

"""The general-kernel task interface: what a task is, how its ABI reads in C, and small input helpers.

A task is plain data plus two small functions. The harness evaluates a task the way it evaluates a
GEMM: it parses and compiles a candidate (hgemm.candidate format, with `task.variables` as the names
its launch spec may use), builds inputs with `make_inputs`, poisons the outputs, launches the entry as

    extern "C" __global__ void <entry>(<task.params in order>)

and compares every "out" tensor with `compute` run on float64-upcast inputs (see `upcast_float64`)
within `atol + rtol * |reference|`. The same `compute` on the native inputs, on the GPU, is the torch
baseline the kernel is timed against.

Conventions every task follows:
- Tensors are contiguous, row-major, and passed as raw pointers; "in" tensors are `const T* __restrict__`
  and must not be modified, "out" tensors are `T* __restrict__` and start as garbage, so a kernel
  must write every output element.
- Scalars are passed by value; a scalar Param's `shape` is the expression of its value.
- float16 is CUDA's `__half` (<cuda_fp16.h>); int64 is `long long`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from hgemm.verify import torch_dtype, upcast_float64  # noqa: F401  (the harness's, part of the task interface)

SOLUTIONS_DIR = Path(__file__).resolve().parent / "solutions"

TENSOR_DTYPES = ("float16", "float32", "int32", "int64")
SCALAR_DTYPES = ("int32", "int64", "float32")
PARAM_KINDS = ("in", "out", "scalar")

_C_TYPES = {"float16": "__half", "float32": "float", "int32": "int", "int64": "long long"}


# ----------------------------------------------------------------------------- size expressions

def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_FUNCTIONS = {"cdiv": _cdiv, "min": min, "max": max}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: lambda a, b: a % b,
}


def _eval_node(node: ast.AST, sizes: dict):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in sizes:
        return sizes[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval_node(node.left, sizes), _eval_node(node.right, sizes))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_node(node.operand, sizes)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_eval_node(a, sizes) for a in node.args))
    raise ValueError(f"unsupported element in size expression: {ast.unparse(node)!r} (sizes: {sorted(sizes)})")


def eval_exprs(text: str, sizes: dict) -> tuple:
    """Evaluate comma-separated arithmetic over the size variables, e.g. "rows, cols" or "1e-5"."""
    tree = ast.parse(f"({text},)", mode="eval").body
    return tuple(_eval_node(elt, sizes) for elt in tree.elts)


# ----------------------------------------------------------------------------- the interface

@dataclass(frozen=True)
class Param:
    """One kernel parameter, in ABI order.

    kind:  "in" (read-only tensor), "out" (tensor the kernel must fully write), "scalar" (by value).
    dtype: tensors: "float16" | "float32" | "int32" | "int64"; scalars: "int32" | "int64" | "float32".
    shape: tensors: comma-separated size expressions ("rows, cols"; "1" for a single element);
           scalars: the expression of the value passed ("n", "rows * cols", "1e-5").
    """

    name: str
    kind: str
    dtype: str
    shape: str

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"param {self.name}: kind must be one of {PARAM_KINDS}, got {self.kind!r}")
        allowed = SCALAR_DTYPES if self.kind == "scalar" else TENSOR_DTYPES
        if self.dtype not in allowed:
            raise ValueError(f"param {self.name}: dtype must be one of {allowed}, got {self.dtype!r}")

    @property
    def is_tensor(self) -> bool:
        return self.kind != "scalar"

    def shape_for(self, sizes: dict) -> tuple[int, ...]:
        """The concrete tensor shape for one size dict."""
        assert self.is_tensor, f"{self.name} is a scalar"
        return tuple(int(d) for d in eval_exprs(self.shape, sizes))

    def value_for(self, sizes: dict) -> int | float:
        """The concrete scalar value passed to the kernel for one size dict."""
        assert not self.is_tensor, f"{self.name} is a tensor"
        (value,) = eval_exprs(self.shape, sizes)
        return float(value) if self.dtype == "float32" else int(value)

    def c_decl(self) -> str:
        ctype = _C_TYPES[self.dtype]
        if self.kind == "in":
            return f"const {ctype}* __restrict__ {self.name}"
        if self.kind == "out":
            return f"{ctype}* __restrict__ {self.name}"
        return f"{ctype} {self.name}"


@dataclass(frozen=True)
class KernelTask:
    """One general CUDA kernel task.

    description: one paragraph for the model's prompt: what to compute, layouts, dtypes.
    params:      the kernel ABI in order.
    variables:   size names usable in shapes and in the candidate's launch spec.
    sizes:       evaluation sizes; the first is small (smoke), at least one is large enough to time.
    make_inputs: (sizes, torch.Generator) -> {name: CPU tensor} for every "in" param, random, never zero.
    compute:     (inputs, sizes) -> {name: tensor} for every "out" param; dtype-generic, so it serves as
                 the float64 reference and, on native GPU inputs, as the timed torch baseline.
    atol, rtol:  the check is |kernel - reference| <= atol + rtol * |reference| elementwise.
    solution:    a correct, reasonably fast reference candidate (CUDA + launch spec).
    """

    name: str
    description: str
    params: tuple[Param, ...]
    variables: tuple[str, ...]
    sizes: tuple[dict, ...]
    make_inputs: Callable[[dict, torch.Generator], dict]
    compute: Callable[[dict, dict], dict]
    atol: float
    rtol: float
    solution: str

    @property
    def inputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "in")

    @property
    def outputs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "out")

    def c_signature(self) -> str:
        """The entry's parameter list, e.g. "(const float* __restrict__ x, float* __restrict__ y, int n)"."""
        return "(" + ", ".join(p.c_decl() for p in self.params) + ")"

    def prompt(self, sizes: dict | Sequence[dict] | None = None) -> str:
        """The model's prompt: description, signature and sizes, asking for exactly one candidate."""
        if sizes is None:
            sizes = self.sizes
        elif isinstance(sizes, dict):
            sizes = (sizes,)
        size_lines = "\n".join("- " + ", ".join(f"{k}={v}" for k, v in s.items()) for s in sizes)
        tensors = "\n".join(
            f"- {p.name}: {p.kind}, {p.dtype}, shape ({p.shape})" if p.is_tensor
            else f"- {p.name}: scalar {p.dtype} = {p.shape}"
            for p in self.params
        )
        names = ", ".join(self.variables)
        return (
            f"Task `{self.name}`: {self.description}\n\n"
            f"Parameters, in order:\n{tensors}\n\n"
            f"Write one CUDA kernel with this exact parameter list (any entry name):\n"
            f'extern "C" __global__ void <entry>{self.c_signature()}\n\n'
            f"It is evaluated at these sizes:\n{size_lines}\n\n"
            "Tensors are contiguous row-major device pointers; __half is from <cuda_fp16.h>. Outputs start "
            "as garbage, so write every output element; never write the inputs. Results are checked against "
            f"a float64 reference with atol={self.atol:g}, rtol={self.rtol:g}, then timed against PyTorch.\n"
            "Reply with one candidate: the complete CUDA source (no host code) containing a launch spec\n"
            "/*@launch\nentry: <entry>\nblock: <1 to 3 ints>\n"
            f"grid: <1 to 3 integer expressions of {names}, num_sms>\nsmem: <dynamic shared memory bytes>\n@*/\n"
            "Expressions may use + - * // %, cdiv, round_up, min and max."
        )


# ----------------------------------------------------------------------------- helpers for task modules

def load_solution(filename: str) -> str:
    """The text of a reference candidate in solutions/."""
    return (SOLUTIONS_DIR / filename).read_text()


def opmath(t: torch.Tensor) -> torch.Tensor:
    """float16 to float32, float32/float64 unchanged: the precision a sensible baseline accumulates in."""
    return t.float() if t.dtype == torch.float16 else t


def uniform(gen: torch.Generator, shape: tuple, lo: float = -1.0, hi: float = 1.0, dtype=torch.float32):
    return (torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def normal(gen: torch.Generator, shape: tuple, std: float = 1.0, mean: float = 0.0, dtype=torch.float32):
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean).to(dtype)


def randint(gen: torch.Generator, shape: tuple, lo: int, hi: int, dtype=torch.int64):
    """Integers in [lo, hi)."""
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)

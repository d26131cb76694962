"""cuBLAS-class baselines, each a callable f(i) that computes buffer set i into its own output.

- cublas:          cublasGemmEx / cublasGemmStridedBatchedEx, fp16 in/out, fp32 compute (CuPy raw bindings;
                   not cupy.matmul, which computes batched fp16 through fp32 copies);
- torch:           torch.matmul (with fp16 reduced-precision reductions off, so it obeys the same fp32
                   accumulation contract as the candidates);
- cublaslt:        cuBLASLt through nvmath-python, the heuristic's first algorithm;
- cublaslt_tuned:  the fastest of the heuristic's top algorithms, each timed by our Timer;
- pad8_cublas:     for misaligned shapes, copy into buffers padded to multiples of 8, cublas, copy back
                   (the copies are inside the timed call);
- torch_compile:   torch.compile(mode="max-autotune-no-cudagraphs"), behind a flag: tuning is slow.

Every baseline's output is verified like a candidate's before its time is used.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .entry import BASELINES, NOTHING_TO_PAD
from .problem import Problem

CUBLAS_COMPUTE_32F = 68
CUDA_R_16F = 2
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_GEMM_DEFAULT = -1
LT_TUNE_CANDIDATES = 8
LT_WORKSPACE = 32 << 20


@dataclass
class Sets:
    """The buffer sets a problem is timed on: inputs shared by all contenders, one output per set."""

    A: list[torch.Tensor]
    B: list[torch.Tensor]

    def __len__(self) -> int:
        return len(self.A)


@dataclass
class Baseline:
    name: str
    run: Callable[[int], None]
    out: list[torch.Tensor]  # out[i]: where run(i) wrote set i's C
    note: str = ""
    variants: dict | None = None  # cublaslt_tuned: algorithm index -> run callable, timed to pick the best


def _cublas_call(problem: Problem, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> Callable[[], None]:
    """Row-major C = A @ op(B) as column-major C^T = op(B)^T @ A^T: swap operands, no copies."""
    # CuPy, only for the baselines that call cuBLAS through it
    from cupy.cuda import device as cp_device
    from cupy_backends.cuda.libs import cublas

    handle = cp_device.get_cublas_handle()
    M, N, K, batch = problem.M, problem.N, problem.K, problem.batch
    alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
    pa, pb = alpha.ctypes.data, beta.ctypes.data
    if problem.layout == "NN":
        opb, ldb = CUBLAS_OP_N, N
    else:
        opb, ldb = CUBLAS_OP_T, K
    ap, bp, cp = a.data_ptr(), b.data_ptr(), c.data_ptr()
    if batch == 1:
        def call():
            cublas.gemmEx(handle, opb, CUBLAS_OP_N, N, M, K, pa, bp, CUDA_R_16F, ldb, ap, CUDA_R_16F, K,
                          pb, cp, CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
    else:
        def call():
            cublas.gemmStridedBatchedEx(handle, opb, CUBLAS_OP_N, N, M, K, pa, bp, CUDA_R_16F, ldb, K * N, ap,
                                        CUDA_R_16F, K, M * K, pb, cp, CUDA_R_16F, N, M * N, batch,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
    call._keepalive = (alpha, beta)  # the scalars must outlive every call
    return call


def make_cublas(problem: Problem, sets: Sets) -> Baseline:
    out = [torch.empty(problem.c_shape, dtype=torch.float16, device="cuda") for _ in range(len(sets))]
    calls = [_cublas_call(problem, sets.A[i], sets.B[i], out[i]) for i in range(len(sets))]
    return Baseline("cublas", lambda i: calls[i](), out)


def _b_operand(problem: Problem, b: torch.Tensor) -> torch.Tensor:
    return b if problem.layout == "NN" else b.transpose(-1, -2)


def make_torch(problem: Problem, sets: Sets) -> Baseline:
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    out = [torch.empty(problem.c_shape, dtype=torch.float16, device="cuda") for _ in range(len(sets))]
    squeeze = problem.batch == 1  # 2-D matmul takes the plain GEMM path, as a user's call would

    def run(i: int) -> None:
        a, b = sets.A[i], _b_operand(problem, sets.B[i])
        if squeeze:
            torch.matmul(a[0], b[0], out=out[i][0])
        else:
            torch.matmul(a, b, out=out[i])

    return Baseline("torch", run, out)


def make_pad8_cublas(problem: Problem, sets: Sets) -> Baseline | None:
    up = lambda x: -(-x // 8) * 8  # noqa: E731
    padded = Problem(up(problem.M), up(problem.N), up(problem.K), problem.batch, problem.layout, problem.shape_class)
    if padded == problem:
        return None  # aligned shape: identical to cublas
    ap = torch.zeros(padded.a_shape, dtype=torch.float16, device="cuda")
    bp = torch.zeros(padded.b_shape, dtype=torch.float16, device="cuda")
    cp = torch.empty(padded.c_shape, dtype=torch.float16, device="cuda")
    out = [torch.empty(problem.c_shape, dtype=torch.float16, device="cuda") for _ in range(len(sets))]
    gemm = _cublas_call(padded, ap, bp, cp)
    M, N, K = problem.M, problem.N, problem.K

    def run(i: int) -> None:
        # the zero padding stays zero: only the live region is overwritten each call
        ap[:, :M, :K].copy_(sets.A[i])
        if problem.layout == "NN":
            bp[:, :K, :N].copy_(sets.B[i])
        else:
            bp[:, :N, :K].copy_(sets.B[i])
        gemm()
        out[i].copy_(cp[:, :M, :N])

    return Baseline("pad8_cublas", run, out, note=f"padded to {padded.M}x{padded.N}x{padded.K}")


def make_cublaslt(problem: Problem, sets: Sets, tuned: bool) -> Baseline | None:
    """cuBLASLt via nvmath-python. One Matmul object per buffer set (operands are bound at creation)."""
    try:
        from nvmath.linalg.advanced import Matmul, MatmulPlanPreferences  # nvmath-python: the cuBLASLt baselines only
    except ImportError as e:
        warnings.warn(f"cublaslt baseline unavailable: {e}", stacklevel=2)
        return None
    limit = LT_TUNE_CANDIDATES if tuned else 1

    def operands(i: int):
        a, b = sets.A[i], _b_operand(problem, sets.B[i])
        return (a[0], b[0]) if problem.batch == 1 else (a, b)

    # One plan, rebound to each buffer set per call: planning per set would cost seconds at 1000 sets.
    mm = Matmul(*operands(0))
    mm.plan(preferences=MatmulPlanPreferences(limit=limit))
    algorithms = list(mm.algorithms)
    out: list[torch.Tensor | None] = [None] * len(sets)

    def runner(alg_index: int):
        alg = algorithms[alg_index]

        def run(i: int) -> None:
            a, b = operands(i)
            mm.reset_operands(a=a, b=b)
            res = mm.execute(algorithm=alg)
            out[i] = res if problem.batch > 1 else res.unsqueeze(0)
        return run

    name = "cublaslt_tuned" if tuned else "cublaslt"
    base = Baseline(name, runner(0), out, note=f"{len(algorithms)} heuristic algorithm(s)")
    if tuned:
        base.variants = {k: runner(k) for k in range(len(algorithms))}
    base._keepalive = mm
    return base


def make_torch_compile(problem: Problem, sets: Sets) -> Baseline:
    fn = torch.compile(lambda a, b: torch.matmul(a, b), mode="max-autotune-no-cudagraphs", dynamic=False)
    out: list[torch.Tensor | None] = [None] * len(sets)

    def run(i: int) -> None:
        a, b = sets.A[i], _b_operand(problem, sets.B[i])
        res = fn(a[0], b[0]) if problem.batch == 1 else fn(a, b)
        out[i] = res.view(problem.c_shape)

    return Baseline("torch_compile", run, out)


def make_baselines(problem: Problem, sets: Sets, names: tuple[str, ...]) -> tuple[list[Baseline], dict[str, str]]:
    """The requested baselines that apply to this problem, and a reason for each that does not."""
    made, skipped = [], {}
    for name in names:
        try:
            if name == "cublas":
                b = make_cublas(problem, sets)
            elif name == "torch":
                b = make_torch(problem, sets)
            elif name == "pad8_cublas":
                b = make_pad8_cublas(problem, sets)
                if b is None:
                    skipped[name] = NOTHING_TO_PAD
            elif name in ("cublaslt", "cublaslt_tuned"):
                b = make_cublaslt(problem, sets, tuned=name == "cublaslt_tuned")
                if b is None:
                    skipped[name] = "nvmath-python not importable"
            elif name == "torch_compile":
                b = make_torch_compile(problem, sets)
            else:
                raise ValueError(f"unknown baseline {name!r} (known: {BASELINES})")
        except ValueError:
            raise
        except Exception as e:  # a baseline library failing on a shape is reported, not fatal
            b, skipped[name] = None, f"{type(e).__name__}: {e}"
        if b is not None:
            made.append(b)
    return made, skipped

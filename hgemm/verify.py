"""Correctness checks for GEMM candidates: inputs, higher-precision reference, tolerances, guard bands.

Device-agnostic torch code: the GPU harness runs it on CUDA tensors, the CPU tests on CPU tensors.

Tolerance, per element (c the kernel's fp16 output, r the float64 reference):

    |c - r| <= 2^-10 * |r|  +  2^-20 * sqrt(K) * (|A| @ |B|)  +  2^-24

- 2^-10 |r|: one fp16 ulp of the result (round-to-nearest needs half of it; any rounding mode passes);
- 2^-20 sqrt(K) (|A||B|): fp32 accumulation in any order. Its rounding error grows like
  sqrt(K) * 2^-24 * (|A||B|) in practice; the bound keeps 16x headroom over that;
- 2^-24: the smallest fp16 subnormal, for results that round to zero.
An fp16 accumulator errs by about sqrt(K) * 2^-12 * (|A||B|), 2^8 times the fp32 allowance, so it fails
(the `uniform_pos` distribution, all-positive with a large K, makes this certain). A kernel that rounds
its inputs to bf16 errs by ~2^-9 per product and fails too.

The `small_int` distribution draws integers in [-2, 2]: every product and partial sum is exact in fp32,
so wherever |r| <= 2048 (exactly representable in fp16) the output must equal r bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .entry import DISTRIBUTIONS
from .problem import Problem

GUARD_BYTES = 1 << 19  # 512 KiB on each side of every buffer


def random_tensor(shape, distribution: str, gen: torch.Generator, device) -> torch.Tensor:
    """fp16 test data; never zeros, since zeros hide unwritten outputs and wrong indexing."""
    if distribution == "normal":
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    elif distribution == "uniform_pos":
        x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * 0.9 + 0.1
    elif distribution == "small_int":
        x = torch.randint(-2, 3, shape, generator=gen, device=device).float()
    else:
        raise ValueError(f"unknown distribution {distribution!r} (known: {DISTRIBUTIONS})")
    return x.to(torch.float16)


class GuardedBuffer:
    """A tensor with guard bands before and after it, filled with a random byte pattern, to catch writes
    past either end. Any dtype: the storage is bytes, the tensor a view."""

    def __init__(self, shape, dtype, device, gen: torch.Generator, guard_bytes: int = GUARD_BYTES):
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        self.guard = -(-guard_bytes // 256) * 256  # keeps the view aligned for every dtype and vector width
        self.nbytes = nbytes
        self.flat = torch.empty(nbytes + 2 * self.guard, dtype=torch.uint8, device=device)
        self.tensor = self.flat[self.guard:self.guard + nbytes].view(dtype).view(shape)
        self.pattern = torch.randint(0, 256, (2 * self.guard,), generator=gen, device=device, dtype=torch.uint8)
        self.restore_guards()

    def restore_guards(self) -> None:
        g = self.guard
        self.flat[:g] = self.pattern[:g]
        self.flat[g + self.nbytes:] = self.pattern[g:]

    def guards_intact(self) -> bool:
        g = self.guard
        return bool(torch.equal(self.flat[:g], self.pattern[:g]) and torch.equal(self.flat[g + self.nbytes:], self.pattern[g:]))

    def poison(self) -> None:
        """NaN bytes in float outputs (0xA5 bytes in integer ones), so an element the kernel does not
        write fails the check."""
        self.flat[self.guard:self.guard + self.nbytes].fill_(0xFF if self.tensor.is_floating_point() else 0xA5)


def reference(A: torch.Tensor, B: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 product and |A| @ |B| (the scale of accumulation error)."""
    a, b = A.double(), B.double()
    if layout == "TN":
        b = b.transpose(-1, -2)
    return torch.matmul(a, b), torch.matmul(a.abs(), b.abs())


@dataclass
class CheckReport:
    ok: bool
    max_abs_err: float
    max_err_over_tol: float
    rel_fro_err: float
    n_bad: int
    n_nan: int
    exact: bool
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def tolerance(ref: torch.Tensor, absprod: torch.Tensor, K: int) -> torch.Tensor:
    return 2.0**-10 * ref.abs() + 2.0**-20 * math.sqrt(K) * absprod + 2.0**-24


def check_output(C: torch.Tensor, ref: torch.Tensor, absprod: torch.Tensor, K: int, exact: bool = False) -> CheckReport:
    c = C.double()
    n_nan = int((~torch.isfinite(c)).sum())
    err = (c - ref).abs()
    tol = tolerance(ref, absprod, K)
    bad = ~(err <= tol)  # NaN compares false, so it counts as bad
    if exact:
        representable = ref.abs() <= 2048
        bad |= representable & (c != ref)
    n_bad = int(bad.sum())
    finite_err = torch.where(torch.isfinite(err), err, torch.zeros_like(err))
    ratio = torch.where(torch.isfinite(err), err / tol, torch.full_like(err, float("inf")))
    denom = float(ref.norm()) or 1.0
    detail = ""
    if n_bad:
        idx = int(bad.flatten().nonzero()[0])
        pos = tuple(int(x) for x in torch.unravel_index(torch.tensor(idx), tuple(C.shape)))
        detail = (f"{n_bad} of {C.numel()} elements out of tolerance; first at (batch, row, col) = {pos}: "
                  f"got {float(c.flatten()[idx])}, want {float(ref.flatten()[idx])}")
    return CheckReport(
        ok=n_bad == 0,
        max_abs_err=float(finite_err.max()) if c.numel() else 0.0,
        max_err_over_tol=float(ratio.max()) if c.numel() else 0.0,
        rel_fro_err=float((torch.where(torch.isfinite(c), c, ref) - ref).norm()) / denom,
        n_bad=n_bad,
        n_nan=n_nan,
        exact=exact,
        detail=detail,
    )


def fingerprint(t: torch.Tensor) -> int:
    """The wrapping int64 sum of a tensor's bit patterns: a write into its bytes changes it, unless
    another write compensates exactly. One reduction, cheap beside a float64 check."""
    flat = t.reshape(-1)
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()]
    return int(flat.view(bits).sum(dtype=torch.int64))


def shared_inputs(problem: Problem, distribution: str, seed: int, device) -> dict:
    """One distribution's verification data, shared by every candidate of a problem: guarded inputs,
    pristine copies of them, the float64 reference and |A| @ |B|, and fingerprints of the last four.
    The guard bands catch writes just past a buffer; a wild write further away can land in this data
    instead, and would then fail every later candidate (or, in |A| @ |B|, loosen their tolerance):
    shared_intact tells, and drawing again from the same seed gives the same data back."""
    gen = torch.Generator(device=device).manual_seed(seed)
    A, B = problem_inputs(problem, distribution, gen, device)
    ref, absprod = reference(A.tensor, B.tensor, problem.layout)
    data = {"distribution": distribution, "seed": seed, "A": A, "B": B, "a0": A.tensor.clone(),
            "b0": B.tensor.clone(), "ref": ref, "absprod": absprod}
    data["prints"] = {name: fingerprint(data[name]) for name in ("a0", "b0", "ref", "absprod")}
    return data


def shared_intact(data: dict) -> bool:
    """Whether shared_inputs' data still holds what it was drawn with: the copies and the reference
    (fingerprints), the guarded inputs (equal to their copies) and their guard bands."""
    return (all(fingerprint(data[name]) == value for name, value in data["prints"].items())
            and all(buf.guards_intact() and torch.equal(buf.tensor.view(torch.int16), data[copy].view(torch.int16))
                    for buf, copy in ((data["A"], "a0"), (data["B"], "b0"))))


def redraw(data: dict, problem: Problem, device) -> None:
    """shared_inputs' data drawn again in place from its seed (the old tensors released first: for the
    largest shapes one distribution's data is gigabytes)."""
    distribution, seed = data["distribution"], data["seed"]
    data.clear()
    data.update(shared_inputs(problem, distribution, seed, device))


def problem_inputs(problem: Problem, distribution: str, gen: torch.Generator, device) -> tuple[GuardedBuffer, GuardedBuffer]:
    A = GuardedBuffer(problem.a_shape, torch.float16, device, gen)
    B = GuardedBuffer(problem.b_shape, torch.float16, device, gen)
    A.tensor.copy_(random_tensor(problem.a_shape, distribution, gen, device))
    B.tensor.copy_(random_tensor(problem.b_shape, distribution, gen, device))
    return A, B


# ----------------------------------------------------------------------------- general tasks' tensors

TASK_DTYPES = {"float16": torch.float16, "float32": torch.float32, "int32": torch.int32, "int64": torch.int64}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a task tensor's dtype name (kernels_corpus.tasks.base.TENSOR_DTYPES)."""
    return TASK_DTYPES[name]


def upcast_float64(inputs: dict) -> dict:
    """Floating tensors to float64, integer tensors (indices) unchanged: a task reference's inputs."""
    return {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in inputs.items()}

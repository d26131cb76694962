"""The tuned kernel library: a dispatch table from shape to the fastest verified kernel, and
`hgemm.matmul(A, B)` on top of it.

Lookup order for a problem: the exact shape in the table; else the nearest tuned shape of the same
layout (distance in log M, log N, log K, log batch) whose kernel supports the shape; else the safe
generic kernel (the table's fallback). Every family kernel is correct for any M, N, K (predicated edge
tiles), so a nearest-bucket kernel is slower at worst, never wrong; its launch spec is still checked
against the shape before it is used.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

from .candidate import Candidate, SpecError, parse_candidate
from .compile import compile_candidate
from .params import gemm_param_buffer, operand_shape, workspace_to_zero
from .problem import Problem

log = logging.getLogger("hgemm.library")
DEFAULT_LIBRARY = Path(__file__).resolve().parent.parent / "results" / "tune"


@dataclass(frozen=True)
class Choice:
    name: str
    candidate: Candidate
    how: str  # "exact", "nearest <key>" or "fallback"


def _distance(a: Problem, b: Problem) -> float:
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2
                         for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K), (a.batch, b.batch))))


class Library:
    def __init__(self, path: str | Path = DEFAULT_LIBRARY):
        self.path = Path(path)
        table = json.loads((self.path / "table.json").read_text())
        self.entries: dict[str, dict] = table.get("entries", {})
        self.fallback: str = table["fallback"]
        self._candidates: dict[str, Candidate] = {}

    def candidate(self, name: str) -> Candidate:
        if name not in self._candidates:
            self._candidates[name] = parse_candidate((self.path / "kernels" / f"{name}.cu").read_text())
        return self._candidates[name]

    def _fits(self, cand: Candidate, problem: Problem) -> bool:
        if not cand.supports(problem.layout) or not tma_compatible(cand, problem):
            return False
        try:
            cand.spec.launch_dims(problem.variables() | {"num_sms": 132})
        except SpecError:
            return False
        return True

    def lookup(self, problem: Problem) -> Choice:
        entry = self.entries.get(problem.key)
        if entry and self._fits(self.candidate(entry["kernel"]), problem):
            return Choice(entry["kernel"], self.candidate(entry["kernel"]), "exact")
        tuned = sorted((_distance(problem, Problem.from_key(k)), k) for k in self.entries
                       if k.endswith("_" + problem.layout))
        for _, key in tuned:
            name = self.entries[key]["kernel"]
            if self._fits(self.candidate(name), problem):
                return Choice(name, self.candidate(name), f"nearest {key}")
        return Choice(self.fallback, self.candidate(self.fallback), "fallback")

    def measured(self) -> dict[str, list[tuple[str, float]]]:
        """problem key -> [(kernel text, speedup over the strongest baseline), ...], fastest first: the
        tuned winner and the reference kernels the tune timed on that shape (the entry's `references`).
        A kernel whose file is missing or whose speedup was not measured is left out."""
        out = {}
        for key, entry in self.entries.items():
            timed = {entry.get("kernel"): entry.get("speedup_vs_best")} | (entry.get("references") or {})
            kernels = [((self.path / "kernels" / f"{name}.cu").read_text(), float(speedup))
                       for name, speedup in timed.items()
                       if isinstance(speedup, (int, float)) and speedup > 0
                       and (self.path / "kernels" / f"{name}.cu").is_file()]
            if kernels:
                out[key] = sorted(kernels, key=lambda ts: -ts[1])
        return out


def measured_kernels(folder: str | Path | None) -> dict[str, list[tuple[str, float]]]:
    """Library(folder).measured(), or {} for no folder or a folder without a table.json."""
    if not folder or not (Path(folder) / "table.json").is_file():
        return {}
    return Library(folder).measured()


def tma_compatible(cand: Candidate, problem: Problem) -> bool:
    """TMA needs every described operand's row pitch to be a multiple of 16 bytes (8 fp16); a staged
    operand is read from a padded copy, whose pitch always is."""
    return all(t.staged or operand_shape(t.operand, problem)[2] % 8 == 0 for t in cand.spec.tensor_maps)


_default: Library | None = None
_launchers: dict = {}
_warned_no_gpu = False  # a process without a GPU hears it once as a warning; each fallback is logged at INFO


def matmul(A, B, library: Library | None = None):
    """C = A @ B for fp16 CUDA tensors (2-D, or 3-D batched), dispatched to the tuned kernel.

    B may be K x N contiguous (layout NN) or the transpose of a contiguous N x K tensor (TN, e.g. an
    nn.Linear weight `.t()`): no copy either way. Anything else falls back to torch.matmul with a
    logged reason (and, on a machine without a GPU, one warning a process)."""
    import torch  # on the first call: `import hgemm` stays free of torch

    global _default
    reason = _unsupported(A, B)
    if reason:
        return _fall_back(A, B, reason)
    lib = library or _default
    if lib is None:
        lib = _default = Library()
    squeeze = A.dim() == 2
    a = A.unsqueeze(0) if squeeze else A
    b = B.unsqueeze(0) if squeeze else B
    layout = "TN" if b.transpose(-1, -2).is_contiguous() and not b.is_contiguous() else "NN"
    if layout == "TN":
        b = b.transpose(-1, -2)  # the N x K storage, contiguous
    a = a.contiguous()
    batch, M, K = a.shape
    N = b.shape[-1] if layout == "NN" else b.shape[-2]
    problem = Problem(M, N, K, batch, layout)
    C = torch.empty((batch, M, N), dtype=torch.float16, device=A.device)
    _launch(lib, problem, a, b.contiguous(), C)
    return C[0] if squeeze else C


def _fall_back(A, B, reason: str):
    import torch  # on first use, as in matmul

    global _warned_no_gpu
    log.info("hgemm.matmul falls back to torch.matmul: %s", reason)
    if not _warned_no_gpu and not torch.cuda.is_available():
        # INFO alone goes unseen: a caller would believe the tuned kernels ran
        _warned_no_gpu = True
        warnings.warn("hgemm.matmul: no CUDA GPU is available, so every call runs torch.matmul instead of "
                      "a tuned kernel", RuntimeWarning, stacklevel=3)
    return torch.matmul(A, B)


def _unsupported(A, B) -> str | None:
    import torch  # on first use, as in matmul

    if not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor)):
        return "operands are not tensors"
    if A.dtype != torch.float16 or B.dtype != torch.float16:
        return f"dtypes {A.dtype}, {B.dtype} (only float16)"
    if not (A.is_cuda and B.is_cuda) or A.device != B.device:
        return "operands are not on one CUDA device"
    if A.dim() != B.dim() or A.dim() not in (2, 3):
        return f"ranks {A.dim()}, {B.dim()} (2-D or 3-D batched, same rank)"
    if A.shape[-1] != B.shape[-2] or (A.dim() == 3 and A.shape[0] != B.shape[0]):
        return f"shapes {tuple(A.shape)} and {tuple(B.shape)} do not multiply"
    if min(A.shape) == 0 or min(B.shape) == 0:
        return "empty operand"
    if A.device.index not in (None, torch.cuda.current_device()):
        return "operands are not on the current device"
    if torch.cuda.current_stream(A.device) != torch.cuda.default_stream(A.device):
        # the kernels launch on the legacy default stream; on another stream the order would be unclear
        return "called on a non-default CUDA stream"
    if (B.dim() == 3 and not (B.is_contiguous() or B.transpose(-1, -2).is_contiguous())) or \
            (B.dim() == 2 and not (B.is_contiguous() or B.t().is_contiguous())):
        return "B is neither contiguous nor a transposed contiguous tensor"
    return None


def _launch(lib: Library, problem: Problem, A, B, C) -> None:
    """Compile (cached on disk) and load the chosen kernel once per (kernel, layout), then launch."""
    import torch  # on first use, as in matmul

    from .runtime import LoadedKernel, device_properties  # loads PyCUDA and initialises CUDA

    choice = lib.lookup(problem)
    key = (choice.name, problem.layout)
    if key not in _launchers:
        res = compile_candidate(choice.candidate, problem.layout)
        if not res.ok:
            raise RuntimeError(f"library kernel {choice.name} failed to compile: {res.error}")
        _launchers[key] = (LoadedKernel(res.cubin_path, choice.candidate.spec.entry), device_properties()["num_sms"])
    kernel, num_sms = _launchers[key]
    grid, block, smem, ws_bytes = choice.candidate.spec.launch_dims(problem.variables() | {"num_sms": num_sms})
    kernel.prepare_smem(smem)
    ws = torch.empty(max(1, ws_bytes), dtype=torch.uint8, device=A.device) if ws_bytes else None
    if ws is not None:
        workspace_to_zero(choice.candidate.spec, problem, ws).zero_()  # the harness's contract, staged copies aside
    kernel.launch(grid, block, gemm_param_buffer(choice.candidate.spec, problem, A, B, C, ws, kernel.param_layout), smem)

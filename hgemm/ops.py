"""`hgemm.matmul` as a PyTorch operator: `torch.ops.hgemm.matmul` and `torch.ops.hgemm.matmul_out`.

The library's kernels launch on torch's current stream, so the op orders with the caller's work on any
stream, records into CUDA graphs (compile and load once, outside capture, by calling it once first),
and is opaque to torch.compile through its fake implementation; its gradient is two more calls of it. Dispatch is decided once per
(library, shape, layout) and cached with the loaded kernel: a call packs parameters and launches. A
library that sets `autotune` decides a shape it has no entry for by timing a few kernels at the first
call (hgemm.autotune). A workspace is zero-filled before each launch, as the harness does, except for a
kernel that keeps it zero itself (`workspace_zero: kept`), which gets one filled once per shape and
stream (up to 128 MB a workspace and 256 MB in all).

Inputs the kernels do not take (not fp16, not CUDA, stacks whose batch dimensions broadcast, a B that
is neither contiguous nor a transposed contiguous tensor, storage that does not start on a 16-byte
boundary) run torch.matmul instead, logged once per reason; a process without a GPU also hears it once
as a warning. Launches go through cuda.bindings (the driver API), not PyCUDA: the harness's PyCUDA
path launches on the legacy default stream only.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from . import autotune
from .compile import compile_candidate
from .entry import SEARCH_TIMERS
from .library import DEFAULT_LIBRARY, Choice, Library
from .params import driver_param_layout, gemm_param_buffer, workspace_to_zero
from .problem import Problem

log = logging.getLogger("hgemm.ops")
_DEFAULT_PATH = str(DEFAULT_LIBRARY)  # absolute; a string, since the ops take the library by path

_libraries: dict[str, Library] = {}
_launchers: dict[tuple[str, str], "StreamKernel"] = {}  # (kernel name, layout) -> loaded kernel
_choices: dict[tuple[str, str], tuple] = {}  # (library, problem key) -> _dispatched's answer
# (device, stream, kernel text's hash, problem key) -> the zero-filled workspace a `workspace_zero: kept` kernel
# leaves zero: one per shape, since a staged copy of one shape may cover where another keeps its
# zeros, and per stream, since launches on two streams would share it at once. The oldest go first
# past KEPT_BYTES in all; a workspace over KEPT_ONE_BYTES (a large shape's staged operand copies, whose
# kernel takes far longer than its fill) is not kept but allocated and filled at each call, as any other.
_kept: dict[tuple[int, int, str, str], torch.Tensor] = {}
KEPT_BYTES, KEPT_ONE_BYTES = 256 << 20, 128 << 20
# Where A, B and C start: TMA descriptors need 16-byte aligned bases, and the harness verifies every
# kernel on buffers that start at least that aligned, so a view at another offset runs torch.matmul
ALIGN = 16
_lock = threading.Lock()
_kept_lock = threading.Lock()  # apart from _lock, which a first call holds through its search
_said: set[str] = set()


class StreamKernel:
    """A cubin's entry loaded through the driver API, launched with a packed parameter buffer on a
    given stream (CU_LAUNCH_PARAM_BUFFER_POINTER, the form PyCUDA uses, but with a stream handle)."""

    def __init__(self, cubin_path: str, entry: str):
        # cuda.bindings loads only where a GPU path runs
        from cuda.bindings import driver as cu

        self.cu = cu
        torch.cuda.init()
        # the device's primary context, the one torch's runtime calls use; bound per calling thread in
        # make_current, since torch's own threads (autograd's backward workers) may have none current
        device = _check(cu, cu.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        self.context = _check(cu, cu.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        self.make_current()
        with open(cubin_path, "rb") as f:
            self.module = _check(cu, cu.cuModuleLoadData(f.read()), "cuModuleLoadData")
        self.function = _check(cu, cu.cuModuleGetFunction(self.module, entry.encode()), "cuModuleGetFunction")
        self.entry = entry
        self.param_layout = driver_param_layout(cu, self.function)
        if self.param_layout is None:
            raise RuntimeError(f"cuFuncGetParamInfo({entry}) failed: the driver cannot lay out the parameters")
        self._smem_limit = 48 * 1024 - _check(cu, cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.function), "cuFuncGetAttribute")

    def make_current(self) -> None:
        """Make the kernel's context current on this thread (tensor maps and launches need one)."""
        current = _check(self.cu, self.cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) != int(self.context):
            (err,) = self.cu.cuCtxSetCurrent(self.context)
            if err != self.cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuCtxSetCurrent: {err.name}")

    def prepare_smem(self, dynamic_smem: int) -> None:
        # dynamic shared memory above 48 KB (less the static part) needs an opt-in, once per size increase
        if dynamic_smem > self._smem_limit:
            attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(self.cu, self.cu.cuFuncSetAttribute(self.function, attr, int(dynamic_smem)),
                   "cuFuncSetAttribute")
            self._smem_limit = dynamic_smem

    def launch(self, grid, block, params: bytes, dynamic_smem: int, stream: int) -> None:
        buf = ctypes.create_string_buffer(params, len(params))
        size = ctypes.c_size_t(len(params))
        # CU_LAUNCH_PARAM_BUFFER_POINTER (1), the buffer, CU_LAUNCH_PARAM_BUFFER_SIZE (2), its size, END (0)
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
        (err,) = self.cu.cuLaunchKernel(self.function, *grid, *block, int(dynamic_smem), stream, None,
                                        ctypes.addressof(extra))
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"launching {self.entry}: {err.name}")


def _check(cu, result, what: str):
    err, *value = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {err.name}")
    return value[0] if len(value) == 1 else tuple(value)


def _library(path: str) -> Library:
    if path not in _libraries:
        if not (Path(path) / "table.json").is_file():
            raise FileNotFoundError(
                f"hgemm.matmul: no kernel library at {path} (no table.json): `snakemake --cores all` writes "
                "results/library, `hgemm tune --out DIR` a tuned one; or pass library='benchmarks/tune'")
        _libraries[path] = Library(path)
    return _libraries[path]


def dispatch(library: str, problem: Problem) -> Choice:
    """The library's choice for a problem, looked up once per (library, shape, layout)."""
    return _dispatched(library, problem)[0]


def _dispatched(library: str, problem: Problem) -> tuple[Choice, StreamKernel | None, tuple | None]:
    """(choice, loaded kernel, (grid, block, smem, workspace bytes)), decided once per shape; no kernel
    and no launch dimensions without a GPU. A library that sets `autotune` has its choice for a shape
    it has no entry for searched at the first eager call (hgemm.autotune); a first call under CUDA-graph
    capture takes the dispatch rule's pick and leaves the search, and the cached decision, to the next."""
    key = (library, problem.key)
    hit = _choices.get(key)
    if hit is None:
        with _lock:
            hit = _choices.get(key)
            if hit is None:
                lib = _library(library)
                choice = lib.lookup(problem)
                if not torch.cuda.is_available():
                    hit = _choices[key] = (choice, None, None)
                    return hit
                if lib.autotune and choice.how != "exact":
                    if torch.cuda.is_current_stream_capturing():
                        return (choice, *_loaded(choice, problem))
                    choice = autotuned(problem, autotune.candidates(lib, problem, choice, lib.autotune)).best
                hit = _choices[key] = (choice, *_loaded(choice, problem))
    return hit


def autotuned(problem: Problem, choices: list[Choice], timer: str = SEARCH_TIMERS[0]) -> autotune.Search:
    """The fastest verified of `choices` (hgemm.autotune.candidates: the dispatch rule's pick first),
    timed on scratch inputs of the problem by `timer` (hgemm.entry.SEARCH_TIMERS); the pick alone where
    the scratch operands do not fit."""

    def launcher(choice: Choice):
        kernel, dims = _loaded(choice, problem)
        if not dims[3] or choice.candidate.spec.zero_each_launch:
            return lambda a, b, c: _launch(choice, kernel, dims, problem, a, b, c)
        # A kept workspace a scratch set (by its C), as the harness gives each of its input sets one: a
        # single one would stay in L2 across the rotation, and a stream-K kernel's partials with it (the
        # harness timed one 8.5 µs slower than such a search did, benchmarks/autotune/search_timer/). Each is made at
        # the set's first launch, a warm-up outside any capture (autotune.SampledRows.time_us).
        kept: dict[int, torch.Tensor] = {}

        def run(a, b, c):
            if c.data_ptr() not in kept:
                kept[c.data_ptr()] = _zeroed(dims[3], c.device)
            _launch(choice, kernel, dims, problem, a, b, c, kept[c.data_ptr()])
        return run

    try:
        search = autotune.pick(problem, choices, launcher, torch.device("cuda", torch.cuda.current_device()), timer)
    except torch.cuda.OutOfMemoryError:  # scratch operands beside the caller's tensors: the search is a luxury
        log.warning("hgemm.matmul: no memory to autotune %s; the dispatch rule's pick %s serves it",
                    problem.key, choices[0].name)
        return autotune.Search(choices[0], choices, {})
    log.info("hgemm.matmul autotuned %s: %s of %s", problem.key, search.best.name,
             ", ".join(f"{n} {t:.1f} us" if isinstance(t, float) else f"{n} {t}" for n, t in search.found.items()))
    return search


def autotuned_choices(lib: Library, problems: list[Problem], top: int,
                      timer: str = SEARCH_TIMERS[0]) -> dict[str, autotune.Search]:
    """The first-call search over the rule's pick and the cost model's first `top` kernels for every
    problem the library has no entry for, by problem key, timed by `timer`; every search's kernels are
    compiled first, all at once, in parallel."""
    searched = {p.key: autotune.candidates(lib, p, first, top) for p in problems
                if (first := lib.lookup(p)).how != "exact"}
    todo = [p for p in problems if p.key in searched]
    autotune.compile_all([(ch, p.layout) for p in todo for ch in searched[p.key]])
    found = {p.key: autotuned(p, searched[p.key], timer) for p in todo}
    torch.cuda.empty_cache()  # the scratch operands: a harness timing next on this GPU gets the memory back
    return found


def _loaded(choice: Choice, problem: Problem) -> tuple[StreamKernel, tuple]:
    """The choice's kernel loaded and its launch dimensions for the problem on this GPU."""
    kernel = _kernel(choice, problem.layout)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    dims = choice.candidate.spec.launch_dims(problem.variables() | {"num_sms": sms})
    kernel.prepare_smem(dims[2])
    return kernel, dims


def _kernel(choice: Choice, layout: str) -> StreamKernel:
    key = (choice.name, layout)
    if key not in _launchers:
        res = compile_candidate(choice.candidate, layout)
        if not res.ok:
            raise RuntimeError(f"library kernel {choice.name} failed to compile: {res.error}")
        _launchers[key] = StreamKernel(res.cubin_path, choice.candidate.spec.entry)
    return _launchers[key]


@dataclass(frozen=True)
class _Operands:
    """A and B as one GEMM of the kernels' form: 3-D, A contiguous, B the contiguous K x N (NN) or N x K
    (TN) storage; C's rows, as `c(out)` views the product's contiguous output."""

    a: torch.Tensor
    b: torch.Tensor
    problem: Problem

    def c(self, out: torch.Tensor) -> torch.Tensor:
        return out.view(self.problem.batch, self.problem.M, self.problem.N)


def _as_gemm(A: torch.Tensor, B: torch.Tensor) -> tuple[_Operands | None, str]:
    """The product as one GEMM the kernels take, without copying B: a stack of A times one matrix B (an
    nn.Linear's input and weight) is one GEMM over all of A's rows, equal stacks are a batch; None with a
    reason for stacks that broadcast against each other (torch.matmul runs those)."""
    K = A.shape[-1]
    if B.dim() == 2:
        a, b = A.reshape(1, -1, K), B.unsqueeze(0)  # a view where A's leading dimensions flatten
    elif A.shape[:-2] == B.shape[:-2]:
        a, b = A.reshape(-1, *A.shape[-2:]), B.reshape(-1, *B.shape[-2:])
    else:
        return None, f"batch dimensions {tuple(A.shape[:-2])} and {tuple(B.shape[:-2])} broadcast (the kernels take equal ones)"
    if b.is_contiguous():
        layout = "NN"
    elif b.transpose(-1, -2).is_contiguous():
        layout, b = "TN", b.transpose(-1, -2)  # the N x K storage, no copy
    else:
        return None, "B is neither contiguous nor a transposed contiguous tensor"
    a = a.contiguous()
    if a.data_ptr() % ALIGN or b.data_ptr() % ALIGN:
        return None, f"an operand's storage does not start on a {ALIGN}-byte boundary (a view at an offset)"
    batch, M, _ = a.shape
    N = b.shape[-1] if layout == "NN" else b.shape[-2]
    return _Operands(a, b, Problem(M, N, K, batch, layout)), ""


def _operands(A: torch.Tensor, B: torch.Tensor) -> tuple[_Operands | None, str]:
    if A.dtype != torch.float16 or B.dtype != torch.float16:
        return None, f"dtypes {A.dtype}, {B.dtype} (only float16)"
    if not (A.is_cuda and B.is_cuda) or A.device != B.device:
        return None, "operands are not on one CUDA device"
    if A.device.index != torch.cuda.current_device():
        return None, "operands are not on the current device"
    if A.numel() == 0 or B.numel() == 0:
        return None, "empty operand"
    return _as_gemm(A, B)


def _out_shape(A: torch.Tensor, B: torch.Tensor) -> tuple[int, ...]:
    """torch.matmul's product shape for matrices and stacks of them (batch dimensions broadcast)."""
    if A.dim() < 2 or B.dim() < 2:
        raise ValueError(f"hgemm.matmul: ranks {A.dim()}, {B.dim()}: matrices or stacks of them (torch.matmul "
                         "takes vectors)")
    if A.shape[-1] != B.shape[-2]:
        raise ValueError(f"hgemm.matmul: shapes {tuple(A.shape)} and {tuple(B.shape)} do not multiply")
    try:
        batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise ValueError(f"hgemm.matmul: the batch dimensions of {tuple(A.shape)} and {tuple(B.shape)} do not "
                         "broadcast") from None
    return (*batch, A.shape[-2], B.shape[-1])


def _say_once(reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        log.info("hgemm.matmul runs torch.matmul: %s", reason)
        if not torch.cuda.is_available() and "no GPU" not in _said:
            # INFO alone goes unseen: a caller would believe the tuned kernels ran
            _said.add("no GPU")
            warnings.warn("hgemm.matmul: no CUDA GPU is available, so every call runs torch.matmul instead "
                          "of a tuned kernel", RuntimeWarning, stacklevel=4)


def _run(A: torch.Tensor, B: torch.Tensor, library: str, out: torch.Tensor) -> None:
    ops, reason = _operands(A, B)
    if ops is None:
        _say_once(reason)
        torch.matmul(A, B, out=out)
        return
    if not out.is_contiguous() or out.data_ptr() % ALIGN:
        _say_once(f"out is not contiguous or does not start on a {ALIGN}-byte boundary")
        torch.matmul(A, B, out=out)
        return
    p = ops.problem
    choice, kernel, dims = _dispatched(library, p)
    _launch(choice, kernel, dims, p, ops.a, ops.b, ops.c(out))


def _launch(choice: Choice, kernel: StreamKernel, dims: tuple, p: Problem, a: torch.Tensor, b: torch.Tensor,
            c: torch.Tensor, ws: torch.Tensor | None = None) -> None:
    """One launch on the current stream: a, b and c as the kernels take them (3-D, contiguous storage).
    `ws`: a zero-filled workspace that the kernel keeps zero (`workspace_zero: kept`), made by the caller."""
    grid, block, smem, ws_bytes = dims
    kernel.make_current()
    spec = choice.candidate.spec
    if ws is None and ws_bytes:
        kept = not spec.zero_each_launch and ws_bytes <= KEPT_ONE_BYTES
        if kept and not torch.cuda.is_current_stream_capturing():
            ws = _kept_workspace(choice.candidate.sha, p, ws_bytes, a.device,
                                 torch.cuda.current_stream(a.device).cuda_stream)
        else:  # the harness's contract, per launch (inside a capture: a fill node of the graph)
            ws = torch.empty(ws_bytes, dtype=torch.uint8, device=a.device)
            zero = workspace_to_zero(spec, p, ws)
            if zero is not None and zero.numel():
                zero.zero_()  # the staged copies at its start are overwritten whole
    params = gemm_param_buffer(spec, p, a, b, c, ws, kernel.param_layout)
    kernel.launch(grid, block, params, smem, torch.cuda.current_stream(a.device).cuda_stream)


def _zeroed(nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.zeros(nbytes, dtype=torch.uint8, device=device)  # filled on the current stream, before the launch


def _kept_workspace(kernel: str, p: Problem, nbytes: int, device: torch.device, stream: int) -> torch.Tensor:
    """The workspace of a `workspace_zero: kept` kernel (by its text's hash) on a stream (its handle) and
    shape, zero-filled once."""
    key = (device.index, stream, kernel, p.key)
    with _kept_lock:
        ws = _kept.get(key)
        if ws is None:
            while _kept and sum(t.numel() for t in _kept.values()) + nbytes > KEPT_BYTES:
                del _kept[next(iter(_kept))]  # freed in its stream's order: queued launches finish first
            ws = _kept[key] = _zeroed(nbytes, device)
    return ws


@torch.library.custom_op("hgemm::matmul", mutates_args=())
def _matmul(A: torch.Tensor, B: torch.Tensor, library: str) -> torch.Tensor:
    out = A.new_empty(_out_shape(A, B))
    _run(A, B, library, out)
    return out


@_matmul.register_fake
def _(A, B, library):
    return A.new_empty(_out_shape(A, B))


def _setup_backward(ctx, inputs, output):
    A, B, library = inputs
    ctx.save_for_backward(A, B)
    ctx.library = library


def _backward(ctx, grad):
    # dA = dC @ B^T and dB = A^T @ dC, through the same kernels (B^T of a contiguous B is a TN operand),
    # summed over the batch dimensions an operand was broadcast along; a B of one matrix under a stack
    # of A takes every row at once: (rows x K)^T @ (rows x N)
    A, B = ctx.saved_tensors
    grad = grad.contiguous()
    dA = dB = None
    if ctx.needs_input_grad[0]:
        dA = torch.ops.hgemm.matmul(grad, B.transpose(-1, -2), ctx.library).sum_to_size(A.shape)
    if ctx.needs_input_grad[1]:
        if B.dim() == 2:
            dB = torch.ops.hgemm.matmul(A.reshape(-1, A.shape[-1]).t().contiguous(), grad.reshape(-1, grad.shape[-1]),
                                        ctx.library)
        else:
            dB = torch.ops.hgemm.matmul(A.transpose(-1, -2).contiguous(), grad, ctx.library).sum_to_size(B.shape)
    return dA, dB, None


_matmul.register_autograd(_backward, setup_context=_setup_backward)


@torch.library.custom_op("hgemm::matmul_out", mutates_args=("out",))
def _matmul_out(A: torch.Tensor, B: torch.Tensor, library: str, out: torch.Tensor) -> None:
    if tuple(out.shape) != _out_shape(A, B) or out.dtype != A.dtype or out.device != A.device:
        raise ValueError(f"hgemm.matmul: out is {tuple(out.shape)} {out.dtype} on {out.device}, the product "
                         f"is {_out_shape(A, B)} {A.dtype} on {A.device}")
    _run(A, B, library, out)


@_matmul_out.register_fake
def _(A, B, library, out):
    return None


def matmul(A: torch.Tensor, B: torch.Tensor, *, out: torch.Tensor | None = None,
           library: str | Path | None = None) -> torch.Tensor:
    """C = A @ B for fp16 CUDA tensors, dispatched to the library's kernel for the shape, on the current
    stream. Matrices, or stacks of them as torch.matmul takes them: a stack of A times one matrix B (an
    nn.Linear's input and weight) runs as one GEMM over all of A's rows, equal stacks as a batched GEMM
    (stacks that broadcast against each other run torch.matmul). B may be K x N contiguous (layout NN) or
    the transpose of a contiguous N x K tensor (TN, e.g. an nn.Linear weight `.t()`): no copy either
    way. `out`: write C there (contiguous, the product's shape and dtype) and return it. `library`: a
    tune folder (table.json and kernels/), by default results/library (the pipeline's final library)."""
    path = os.fspath(library) if library is not None else _DEFAULT_PATH
    if out is None:
        return torch.ops.hgemm.matmul(A, B, path)
    torch.ops.hgemm.matmul_out(A, B, path, out)
    return out

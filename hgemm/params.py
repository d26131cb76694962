"""Kernel parameter buffers, packed at the offsets the compiled kernel expects.

PyCUDA's own argument packing does not align, so the harness packs the whole buffer here and hands it
to the launch as one block. Where the offsets come from matters: ptxas aligns each parameter's
*absolute* constant-bank address, and on sm_90 the parameters start at 0x210, so a 128-byte-aligned
CUtensorMap after the HGEMM ABI's 48 bytes lands at offset 0x70, not at the 0x40 (or 0x80) that
packing from zero gives. With a GPU the driver reports every offset (cuFuncGetParamInfo, see
hgemm.runtime.LoadedKernel.param_layout) and that layout is used; natural alignment from zero is the
fallback for drivers without the query, and is right for kernels without tensor maps.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import tensormap
from .candidate import SpecError


@dataclass
class Param:
    """One kernel parameter: a C type code and the value. Codes: P pointer, i int32, q int64, f float32,
    T a 128-byte CUtensorMap (bytes)."""

    code: str
    value: object


_SIZES = {"P": (8, 8), "i": (4, 4), "q": (8, 8), "f": (4, 4), "T": (128, 64)}


def _encode(p: Param) -> bytes:
    if p.code == "T":
        raw = bytes(p.value)
        if len(raw) != 128:
            raise ValueError("a CUtensorMap is 128 bytes")
        return raw
    if p.code == "P":
        return struct.pack("<Q", int(p.value))
    return struct.pack("<" + p.code, p.value)


def param_layout(params: list[Param], layout: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """(offset, size) per parameter: the kernel's as the driver reports it (`layout`), else natural
    alignment from zero. A kernel whose signature does not match the ABI's parameters is a SpecError
    on `entry`, since launching it would read garbage."""
    if layout is None:
        layout, end = [], 0
        for p in params:
            size, align = _SIZES[p.code]
            end += -end % align
            layout.append((end, size))
            end += size
    if len(layout) != len(params):
        raise SpecError("entry", f"the kernel takes {len(layout)} parameters; the ABI passes {len(params)}")
    for i, (p, (_, size)) in enumerate(zip(params, layout)):
        if size != _SIZES[p.code][0]:
            raise SpecError("entry", f"kernel parameter {i} is {size} bytes; the ABI passes {_SIZES[p.code][0]}")
    return layout


def driver_param_layout(cu, function) -> list[tuple[int, int]] | None:
    """(offset, size) of each parameter of a loaded CUfunction as the driver lays them out
    (cuFuncGetParamInfo, CUDA 12.4+; `cu` is cuda.bindings.driver), or None where the query fails."""
    layout = []
    while True:
        err, offset, size = cu.cuFuncGetParamInfo(function, len(layout))
        if err == cu.CUresult.CUDA_ERROR_INVALID_VALUE:  # past the last parameter
            return layout
        if err != cu.CUresult.CUDA_SUCCESS:  # e.g. CUDA_ERROR_NOT_SUPPORTED on an old driver
            return None
        layout.append((int(offset), int(size)))


def pack_params(params: list[Param], layout: list[tuple[int, int]] | None = None) -> bytes:
    """The parameter buffer, at the offsets of param_layout."""
    layout = param_layout(params, layout)
    buf = bytearray(max((off + size for off, size in layout), default=0))
    for p, (off, size) in zip(params, layout):
        buf[off:off + size] = _encode(p)
    return bytes(buf)


def patch_params(buf: bytes, params: list[Param], layout: list[tuple[int, int]], which: list[int]) -> bytes:
    """buf with parameters `which` replaced by those of `params` (same signature): how the timing
    rotation pairs one input set's parameters with another output's without packing anew."""
    out = bytearray(buf)
    for i in which:
        off, size = layout[i]
        out[off:off + size] = _encode(params[i])
    return bytes(out)


# Where a staged operand's copy starts in the workspace: a multiple of this many bytes.
STAGE_ALIGN = 1024
# A staged copy's row pitch: a multiple of this many fp16 (128 bytes, one TMA box row of a 128-byte
# swizzle), so that no box row straddles two 128-byte lines. TMA itself accepts any 16-byte multiple.
# A pitch of 16 bytes but not 128 (4104, 8200 fp16) costs the TMA kernel 30-35% a flop
# (benchmarks/row_pitch/; scripts/gpu_library.sh's pitch probe).
STAGED_PITCH = 64


@dataclass(frozen=True)
class StagedOperand:
    """A padded copy of an input that a kernel writes into its workspace for TMA to read: `batch` x
    `rows` rows of `cols` fp16, each row `pitch` elements long (cols rounded up to STAGED_PITCH),
    at byte `offset`. The pad elements are never read: the descriptor's dims are (cols, rows, batch)."""

    operand: str
    offset: int
    batch: int
    rows: int
    cols: int
    pitch: int

    @property
    def nbytes(self) -> int:
        return self.batch * self.rows * self.pitch * 2

    @property
    def end(self) -> int:
        """Where the next staged copy (or the kernel's own workspace) starts."""
        return self.offset + -(-self.nbytes // STAGE_ALIGN) * STAGE_ALIGN


def operand_shape(operand: str, problem) -> tuple[int, int, int]:
    """(batch, rows, cols) of a row-major HGEMM operand."""
    if operand == "A":
        return problem.batch, problem.M, problem.K
    if operand == "B":
        return (problem.batch, problem.K, problem.N) if problem.layout == "NN" else (problem.batch, problem.N, problem.K)
    return problem.batch, problem.M, problem.N


def staged_operands(spec, problem) -> list[StagedOperand]:
    """The staged copies of a spec's `staged=1` tensor maps, in the order of their lines, packed from
    the start of the workspace. Kernels compute the same offsets (hgemm/include/hgemm/staged_loader.cuh)."""
    out, offset = [], 0
    for t in spec.tensor_maps:
        if t.staged:
            batch, rows, cols = operand_shape(t.operand, problem)
            out.append(StagedOperand(t.operand, offset, batch, rows, cols, -(-cols // STAGED_PITCH) * STAGED_PITCH))
            offset = out[-1].end
    return out


def workspace_to_zero(spec, problem, W):
    """The part of the workspace the harness zeroes before every launch (once, when it is allocated,
    for a kernel that keeps it zero: `workspace_zero: kept`): all of it, less the staged copies at its
    start (`staged=1` tensor maps), which the kernel overwrites whole. Zeroing those would
    add ~25 us of memset to a 4095^3 launch for nothing. None without a workspace."""
    if W is None:
        return None
    staged = staged_operands(spec, problem)
    flat = W.view(-1)
    return flat[max(s.end for s in staged) // flat.element_size():] if staged else flat


def gemm_param_buffer(spec, problem, A, B, C, W=None, layout: list[tuple[int, int]] | None = None) -> bytes:
    """The packed HGEMM ABI: pointers, sizes, workspace, then one TMA descriptor per tensor_map line.
    A, B, C, W are anything with data_ptr() (torch tensors); W may be None. `layout` as in pack_params."""
    return pack_params(gemm_params(spec, problem, A, B, C, W), layout)


def output_params(spec) -> list[int]:
    """Which of gemm_params' parameters depend on the output and workspace rather than on the inputs:
    C, the workspace pointer, and the tensor maps of C and of staged copies (which live in the workspace)."""
    return [2, 7] + [8 + j for j, t in enumerate(spec.tensor_maps) if t.staged or t.operand == "C"]


def gemm_params(spec, problem, A, B, C, W=None) -> list[Param]:
    """The HGEMM ABI's parameters, in order (see gemm_param_buffer)."""
    params = [Param("P", A.data_ptr()), Param("P", B.data_ptr()), Param("P", C.data_ptr()),
              Param("i", problem.M), Param("i", problem.N), Param("i", problem.K), Param("i", problem.batch),
              Param("P", W.data_ptr() if W is not None else 0)]
    if spec.tensor_maps:
        operands = {"A": A, "B": B, "C": C}
        staged = {s.operand: s for s in staged_operands(spec, problem)}
        if staged:
            room = W.numel() * W.element_size() if W is not None else 0
            need = max(s.end for s in staged.values())
            if room < need:
                raise SpecError("workspace", f"{room} bytes cannot hold the staged operands' {need}")
        for t in spec.tensor_maps:
            if t.staged:
                s = staged[t.operand]
                desc = tensormap.encode_tiled(W.data_ptr() + s.offset, [s.cols, s.rows, s.batch],
                                              [s.pitch * 2, s.rows * s.pitch * 2], [t.box[1], t.box[0], 1], t.swizzle)
            else:
                desc = tensormap.encode_tensor_map(operands[t.operand], t.box, t.swizzle)
            params.append(Param("T", desc))
    return params

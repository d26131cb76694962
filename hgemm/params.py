"""Kernel parameter buffers, packed with the C ABI's natural alignment.

PyCUDA's own argument packing does not align, and a CUtensorMap parameter must sit at a 64-byte
offset, so the harness packs the whole buffer here and hands it to the launch as one block.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass
class Param:
    """One kernel parameter: a C type code and the value. Codes: P pointer, i int32, q int64, f float32,
    T a 128-byte CUtensorMap (bytes)."""

    code: str
    value: object


_SIZES = {"P": (8, 8), "i": (4, 4), "q": (8, 8), "f": (4, 4), "T": (128, 64)}


def pack_params(params: list[Param]) -> bytes:
    buf = bytearray()
    for p in params:
        size, align = _SIZES[p.code]
        buf += b"\0" * (-len(buf) % align)
        if p.code == "T":
            raw = bytes(p.value)
            if len(raw) != 128:
                raise ValueError("a CUtensorMap is 128 bytes")
            buf += raw
        elif p.code == "P":
            buf += struct.pack("<Q", int(p.value))
        else:
            buf += struct.pack("<" + p.code, p.value)
    return bytes(buf)


def gemm_param_buffer(spec, problem, A, B, C, W=None) -> bytes:
    """The packed HGEMM ABI: pointers, sizes, workspace, then one TMA descriptor per tensor_map line.
    A, B, C, W are anything with data_ptr() (torch tensors); W may be None."""
    params = [Param("P", A.data_ptr()), Param("P", B.data_ptr()), Param("P", C.data_ptr()),
              Param("i", problem.M), Param("i", problem.N), Param("i", problem.K), Param("i", problem.batch),
              Param("P", W.data_ptr() if W is not None else 0)]
    if spec.tensor_maps:
        from .runtime import encode_tensor_map  # GPU-only: the driver encodes descriptors

        operands = {"A": A, "B": B, "C": C}
        params += [Param("T", encode_tensor_map(operands[t.operand], t.box, t.swizzle)) for t in spec.tensor_maps]
    return pack_params(params)

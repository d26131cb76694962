"""TMA descriptors (CUtensorMap) for the tensor_map lines of a candidate's launch spec.

Kept apart from hgemm.runtime, which initialises CUDA on import, so the argument handling can be tested
on a machine without a GPU (the driver then refuses the call, which is reported as ValueError).
"""

from __future__ import annotations

import struct


def encode_tiled(ptr: int, dims: list[int], strides: list[int], box: list[int], swizzle: int) -> bytes:
    """A tiled fp16 tensor map of any rank: dims and box innermost first, strides in bytes for dims 1..;
    ValueError if the driver refuses it."""
    from cuda.bindings import driver as cu  # the CUDA driver bindings, on first use only

    sw = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[swizzle]
    # The bindings take cuuint64_t / cuuint32_t objects, not plain ints.
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, len(dims), ptr,
        [cu.cuuint64_t(x) for x in dims], [cu.cuuint64_t(x) for x in strides], [cu.cuuint32_t(x) for x in box],
        [cu.cuuint32_t(1)] * len(dims),
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{sw}"),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeTiled refused dims {dims}, box {box}, swizzle {swizzle}: {err}")
    return struct.pack("<16Q", *(int(x) for x in tmap.opaque))


def encode_tensor_map(t, box: tuple[int, int], swizzle: int) -> bytes:
    """A TMA descriptor for a contiguous fp16 (batch, rows, cols) tensor (anything with .shape and
    .data_ptr()); ValueError if TMA refuses it. The box is (rows, cols) of one load."""
    batch, rows, cols = t.shape
    if (cols * 2) % 16 or t.data_ptr() % 16:
        raise ValueError(f"TMA needs 16-byte aligned rows; a row of {cols} fp16 is {cols * 2} bytes")
    return encode_tiled(t.data_ptr(), [cols, rows, batch], [cols * 2, rows * cols * 2], [box[1], box[0], 1], swizzle)

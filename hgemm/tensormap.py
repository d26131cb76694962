"""TMA descriptors (CUtensorMap) for the tensor_map lines of a candidate's launch spec.

Kept apart from hgemm.runtime, which initialises CUDA on import, so the argument handling can be tested
on a machine without a GPU (the driver then refuses the call, which is reported as ValueError).
"""

from __future__ import annotations

import struct


def encode_tensor_map(t, box: tuple[int, int], swizzle: int) -> bytes:
    """A TMA descriptor for a contiguous fp16 (batch, rows, cols) tensor (anything with .shape and
    .data_ptr()); ValueError if TMA refuses it. The box is (rows, cols) of one load."""
    from cuda.bindings import driver as cu

    batch, rows, cols = t.shape
    if (cols * 2) % 16 or t.data_ptr() % 16:
        raise ValueError(f"TMA needs 16-byte aligned rows; a row of {cols} fp16 is {cols * 2} bytes")
    sw = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[swizzle]
    # The bindings take cuuint64_t / cuuint32_t objects, not plain ints. Innermost dimension first.
    dims = [cu.cuuint64_t(x) for x in (cols, rows, batch)]
    strides = [cu.cuuint64_t(x) for x in (cols * 2, rows * cols * 2)]  # bytes, dimensions 1.. only
    box_dims = [cu.cuuint32_t(x) for x in (box[1], box[0], 1)]
    element_strides = [cu.cuuint32_t(1)] * 3
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, t.data_ptr(),
        dims, strides, box_dims, element_strides,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{sw}"),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeTiled refused box {box}, swizzle {swizzle}: {err}")
    return struct.pack("<16Q", *(int(x) for x in tmap.opaque))

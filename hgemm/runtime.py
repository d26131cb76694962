"""Load cubins and launch kernels through PyCUDA, on the primary context shared with torch and CuPy.

Buffers are torch tensors; kernels get their raw device pointers. The parameter buffer is packed by
hgemm.params at the offsets the driver reports for the loaded function (LoadedKernel.param_layout),
and handed to PyCUDA's launch as one block, so no per-argument Python conversion runs on the launch path.

Everything here needs a GPU; import it only inside GPU code paths.
"""

from __future__ import annotations

import struct
from pathlib import Path

import torch

# torch first: it creates (or retains) the device's primary context, which PyCUDA then shares.
torch.cuda.init()
import pycuda.autoprimaryctx  # noqa: E402,F401  (pushes the primary context of device 0)
import pycuda.driver as cuda  # noqa: E402

from .candidate import Candidate, parse_candidate  # noqa: E402
from .params import driver_param_layout  # noqa: E402

STICKY_MARKERS = ("illegal address", "illegal instruction", "misaligned address", "unspecified launch failure",
                  "hardware stack error", "invalid program counter", "exception", "launch timed out",
                  "an illegal memory access", "LAUNCH_FAILED")


class ContextLost(RuntimeError):
    """The CUDA context is unusable (sticky fault); the process must be replaced."""


class KernelLaunchError(RuntimeError):
    """A kernel failed at launch or while running. `sticky` means the context is now unusable."""

    def __init__(self, message: str, sticky: bool):
        super().__init__(message)
        self.sticky = sticky


def device_properties() -> dict:
    dev = pycuda.autoprimaryctx.device
    attr = cuda.device_attribute
    return {
        "name": dev.name(),
        "compute_capability": "%d.%d" % dev.compute_capability(),
        "num_sms": dev.get_attribute(attr.MULTIPROCESSOR_COUNT),
        "l2_bytes": dev.get_attribute(attr.L2_CACHE_SIZE),
        "max_smem_per_block_optin": dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        "max_regs_per_block": dev.get_attribute(attr.MAX_REGISTERS_PER_BLOCK),
        "total_memory": dev.total_memory(),
        "pci_bus_id": dev.pci_bus_id(),  # how NVML finds this GPU (hgemm.clocks)
    }


def synchronize() -> None:
    """Device-wide synchronise; turns a kernel fault into KernelLaunchError."""
    try:
        cuda.Context.synchronize()
    except cuda.Error as e:
        raise KernelLaunchError(str(e), is_sticky(e)) from None


def is_sticky(err: Exception) -> bool:
    text = str(err).lower()
    if any(m.lower() in text for m in STICKY_MARKERS):
        return True
    # a cheap probe: after a sticky fault every driver call fails
    try:
        cuda.Context.synchronize()
        cuda.mem_get_info()
        return False
    except cuda.Error:
        return True


def _param_layout(cubin_path: str, entry: str) -> list[tuple[int, int]] | None:
    """(offset, size) of each kernel parameter as the driver lays them out (cuFuncGetParamInfo, CUDA
    12.4+), or None where the query is unavailable. PyCUDA does not expose the query, so the cubin is
    loaded a second time through cuda.bindings, in the same (current) context, just to ask."""
    try:
        from cuda.bindings import driver as cu  # a second set of CUDA bindings, only for this query
    except ImportError:
        return None
    if not hasattr(cu, "cuFuncGetParamInfo"):  # bindings older than CUDA 12.4
        return None
    with open(cubin_path, "rb") as f:
        err, module = cu.cuModuleLoadData(f.read())
    if err != cu.CUresult.CUDA_SUCCESS:
        return None
    try:
        err, func = cu.cuModuleGetFunction(module, entry.encode())
        return driver_param_layout(cu, func) if err == cu.CUresult.CUDA_SUCCESS else None
    finally:
        cu.cuModuleUnload(module)


class LoadedKernel:
    """A cubin's entry function, ready to launch with a packed parameter buffer."""

    def __init__(self, cubin_path: str, entry: str):
        with open(cubin_path, "rb") as f:
            self.module = cuda.module_from_buffer(f.read())
        self.function = self.module.get_function(entry)
        self.entry = entry
        self.static_smem = self.function.get_attribute(cuda.function_attribute.SHARED_SIZE_BYTES)
        self._dynamic_limit = 48 * 1024 - self.static_smem  # what a launch may ask without opting in
        self.param_layout = _param_layout(cubin_path, entry)

    def attributes(self) -> dict:
        fa = cuda.function_attribute
        return {
            "registers": self.function.get_attribute(fa.NUM_REGS),
            "smem_static": self.function.get_attribute(fa.SHARED_SIZE_BYTES),
            "local_bytes": self.function.get_attribute(fa.LOCAL_SIZE_BYTES),
            "max_threads_per_block": self.function.get_attribute(fa.MAX_THREADS_PER_BLOCK),
        }

    def prepare_smem(self, dynamic_smem: int) -> None:
        # Static plus dynamic shared memory above 48 KB needs an opt-in, once per size increase.
        if dynamic_smem > self._dynamic_limit:
            self.function.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem)
            self._dynamic_limit = dynamic_smem

    def launch(self, grid, block, arg_buf: bytes, dynamic_smem: int = 0) -> None:
        try:
            # None: the legacy default stream, shared with torch's and CuPy's default streams, so a
            # kernel is ordered with the harness's copies, checks and events without extra syncs.
            self.function._launch_kernel(tuple(grid), tuple(block), arg_buf, int(dynamic_smem), None)
        except cuda.Error as e:
            raise KernelLaunchError(str(e), is_sticky(e)) from None


# Small utility kernels the harness itself needs (hgemm/utilities.cu), compiled once per process.
UTILITY_SOURCE = Path(__file__).with_name("utilities.cu")


class Utilities:
    def __init__(self, cubin_path: str, props: dict):
        with open(cubin_path, "rb") as f:
            self.module = cuda.module_from_buffer(f.read())
        self.spin_fn = self.module.get_function("hgemm_spin")
        self.scrub_fn = self.module.get_function("hgemm_scrub_smem")
        self.max_smem = props["max_smem_per_block_optin"]
        self.num_sms = props["num_sms"]
        self.scrub_fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, self.max_smem)

    def spin(self, ns: int) -> None:
        self.spin_fn._launch_kernel((1, 1, 1), (1, 1, 1), struct.pack("<Q", int(ns)), 0, None)

    def scrub_shared_memory(self) -> None:
        words = self.max_smem // 4
        # one block fills an SM's shared memory, so 2 blocks per SM reach every SM
        self.scrub_fn._launch_kernel((2 * self.num_sms, 1, 1), (1024, 1, 1), struct.pack("<I", words),
                                     self.max_smem, None)


def utility_candidate() -> Candidate:
    return parse_candidate(UTILITY_SOURCE.read_text())

"""The instruction mix of a compiled kernel, read from its SASS with nvdisasm.

Why a shape misses its target often shows in which instructions the kernel is made of: HGMMA (wgmma,
the Hopper tensor-core path cuBLAS uses) or HMMA (mma.sync, about two thirds of that rate), TMA loads
(UTMALDG) or cp.async (LDGSTS) or plain loads, local-memory traffic (LDL/STL: spills or a stack
array). The name of a kernel says what it meant to compile to; this says what it did.

nvdisasm comes from the CUDA toolkit or the PyPI `nvidia-cuda-nvdisasm` package; without it the
profile is None, and callers say so.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .compile import find_cuda_tool

# Opcode families worth counting, and what each one is.
OPCODES = {
    "HGMMA": "wgmma: warpgroup tensor-core MMA (sm_90a)",
    "HMMA": "mma.sync: warp tensor-core MMA",
    "UTMALDG": "TMA load (cp.async.bulk.tensor)",
    "UTMASTG": "TMA store",
    "UBLKCP": "bulk copy (cp.async.bulk, no tensor map)",
    "LDGSTS": "cp.async global -> shared",
    "LDSM": "ldmatrix",
    "LDG": "global load",
    "STG": "global store",
    "LDS": "shared load",
    "STS": "shared store",
    "LDL": "local load (spill or stack array)",
    "STL": "local store (spill or stack array)",
    "FFMA": "fp32 fused multiply-add (CUDA cores)",
    "HFMA2": "fp16x2 fused multiply-add (CUDA cores)",
}
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")
_FUNCTION = re.compile(r"^\s*\.(?:section|text)\s*\.?text\.([A-Za-z_][A-Za-z0-9_$]*)|^\.text\.([A-Za-z_][A-Za-z0-9_$]*):")


def tensor_core_path(counts: dict[str, int]) -> str:
    if counts.get("HGMMA"):
        return "HGMMA (wgmma)"
    if counts.get("HMMA"):
        return "HMMA (mma.sync)"
    return "no tensor-core MMA (CUDA cores)"


def profile(cubin_path: str | Path, entry: str) -> dict | None:
    """{"path": tensor-core path, "instructions": total, "counts": {opcode family: n}} of one entry's
    code, or None when nvdisasm is not available or cannot read the cubin. Cached beside the cubin."""
    cubin = Path(cubin_path)
    cached = cubin.with_name(f"{cubin.stem}.{entry}.sass.json")
    if cached.exists():
        return json.loads(cached.read_text())
    nvdisasm = find_cuda_tool("nvdisasm")
    if nvdisasm is None:
        return None
    try:
        proc = subprocess.run([nvdisasm, "-c", str(cubin)], check=False, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    counts, total, current = {}, 0, None
    for line in proc.stdout.splitlines():
        m = _FUNCTION.match(line)
        if m:
            current = m.group(1) or m.group(2)
            continue
        m = _INSTRUCTION.match(line)
        if m and current == entry:
            total += 1
            family = m.group(1).split(".")[0]
            if family in OPCODES:
                counts[family] = counts.get(family, 0) + 1
    if total == 0:
        return None  # the entry was not found in the listing
    result = {"path": tensor_core_path(counts), "instructions": total, "counts": counts}
    try:
        cached.write_text(json.dumps(result))
    except OSError:
        pass  # a read-only cache is no reason to fail
    return result

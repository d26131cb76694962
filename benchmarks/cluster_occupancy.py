"""How many clusters of each wgmma cluster kernel the GPU holds at once (cuOccupancyMaxActiveClusters).

A cluster's CTAs must sit on SMs of one GPC, so a GPU of 132 SMs need not hold 132 / 4 clusters of 4
CTAs of one SM each: a cluster split-K kernel whose tiles need more clusters than that runs a second
round. hgemm.tune's estimate ranks split variants with these capacities.

    python benchmarks/cluster_occupancy.py --out $OUT/cluster_occupancy.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hgemm.candidate import parse_candidate  # noqa: E402
from hgemm.compile import compile_candidate  # noqa: E402
from hgemm.envinfo import environment  # noqa: E402
from kernels_corpus.families import wgmma  # noqa: E402

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class LaunchConfig(ctypes.Structure):   # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")


def max_active_clusters(cuda, cubin: bytes, entry: str, block: int, smem: int, ctas: int) -> int:
    module, func, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
    _check(cuda.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
    _check(cuda.cuModuleGetFunction(ctypes.byref(func), module, entry.encode()), "cuModuleGetFunction")
    _check(cuda.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute")
    # the entry's __cluster_dims__ fixes the cluster shape; the grid only has to be whole clusters
    config = LaunchConfig(ctas * 64, 1, 1, block, 1, 1, smem, None, None, 0)
    _check(cuda.cuOccupancyMaxActiveClusters(ctypes.byref(n), func, ctypes.byref(config)), "cuOccupancyMaxActiveClusters")
    cuda.cuModuleUnload(module)
    return n.value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch

    torch.zeros(1, device="cuda")   # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    rows = []
    for p in wgmma.variants():
        ctas = p.get("cluster", 1) * p.get("split_k", 1)
        if ctas == 1:
            continue
        text = wgmma.render(p)
        spec = parse_candidate(text).spec
        res = compile_candidate(parse_candidate(text), layout="NN")
        if not res.ok:
            rows.append({"name": wgmma.name(p), "ctas": ctas, "error": res.error[:500]})
            continue
        smem = spec.launch_dims(dict(M=4096, N=4096, K=4096, batch=1, num_sms=132))[2]
        n = max_active_clusters(cuda, Path(res.cubin_path).read_bytes(), spec.entry, spec.block[0], smem, ctas)
        rows.append({"name": wgmma.name(p), "ctas": ctas, "smem": smem, "max_active_clusters": n})
    Path(args.out).write_text(json.dumps({"env": environment(), "kernels": rows}, indent=1))
    print("| kernel | CTAs a cluster | smem | clusters at once | CTAs at once |\n|---|---:|---:|---:|---:|")
    for r in rows:
        n = r.get("max_active_clusters", 0)
        print(f"| {r['name']} | {r['ctas']} | {r.get('smem', '-')} | {n} | {n * r['ctas']} |")


if __name__ == "__main__":
    main()

"""The SASS instruction mix: which tensor-core path a compiled kernel really takes (nvdisasm)."""

from __future__ import annotations

import pytest

from conftest import ROOT
from hgemm.candidate import parse_candidate
from hgemm.compile import compile_candidate, find_cuda_tool, find_nvcc
from hgemm.sass import profile, tensor_core_path

INCLUDE = ROOT / "hgemm" / "include"   # the device headers the family renders include
needs_tools = pytest.mark.skipif(find_nvcc() is None or find_cuda_tool("nvdisasm") is None,
                                 reason="needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)")


def _profile(text: str, tmp_path, layout: str = "NN") -> dict | None:
    cand = parse_candidate(text)
    result = compile_candidate(cand, layout, arch="sm_90a", cache_dir=tmp_path, extra_flags=("-I", str(INCLUDE)))
    assert result.ok, result.error
    return profile(result.cubin_path, cand.spec.entry)


@needs_tools
def test_paths_of_the_reference_and_family_kernels(tmp_path):
    from kernels_corpus.families import wgmma

    naive = _profile((ROOT / "kernels_corpus/reference/naive.cu").read_text(), tmp_path)
    assert naive["path"] == "no tensor-core MMA (CUDA cores)" and naive["counts"].get("FFMA")
    mma = _profile((ROOT / "kernels_corpus/reference/mma_sync.cu").read_text(), tmp_path)
    assert mma["path"] == "HMMA (mma.sync)" and mma["counts"]["HMMA"] > 0 and "HGMMA" not in mma["counts"]
    # the pipelined reference: cp.async (LDGSTS) into shared memory, ldmatrix (LDSM) out of it, no spills
    for layout in ("NN", "TN"):
        piped = _profile((ROOT / "kernels_corpus/reference/mma_pipelined.cu").read_text(), tmp_path, layout)
        assert piped["path"] == "HMMA (mma.sync)" and piped["counts"]["HMMA"] >= 32
        assert piped["counts"].get("LDGSTS") and piped["counts"].get("LDSM")
        assert not piped["counts"].get("LDL") and not piped["counts"].get("STL")
    tma = next(p for p in wgmma.variants() if p.get("loader") is None)
    hopper = _profile(wgmma.render(tma), tmp_path, "TN")
    assert hopper["path"] == "HGMMA (wgmma)" and hopper["counts"]["UTMALDG"] > 0
    assert not hopper["counts"].get("LDL") and not hopper["counts"].get("STL")  # no spills
    # the staged loader: the grid's 16-byte copies (LDG, STG) of the operands, then the same TMA ring
    staged = next(p for p in wgmma.variants() if p.get("loader") == "staged")
    fed = _profile(wgmma.render(staged), tmp_path, "NN")
    assert fed["path"] == "HGMMA (wgmma)" and fed["counts"]["UTMALDG"] > 0
    assert fed["counts"].get("LDG") and fed["counts"].get("STG")
    assert not fed["counts"].get("LDL") and not fed["counts"].get("STL")
    # cached beside the cubin: a second read does not run nvdisasm again
    assert list(tmp_path.glob("*.sass.json"))


@needs_tools
def test_spills_show_as_local_memory(tmp_path):
    # a dynamically indexed stack array lives in local memory: LDL/STL in SASS
    text = """
/*@launch
entry: local_array
block: 32
grid: 1
smem: 0
@*/
#include <cuda_fp16.h>
extern "C" __global__ void local_array(const __half* A, const __half* B, __half* C, int M, int N, int K,
                                       int batch, void* workspace) {
  float buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = __half2float(A[(i * 7 + threadIdx.x) % (M * K)]);
  C[threadIdx.x % (M * N)] = __float2half(buf[(K + threadIdx.x) % 64]);
}
"""
    mix = _profile(text, tmp_path)
    assert mix["counts"].get("LDL") and mix["counts"].get("STL")


def test_without_nvdisasm_there_is_no_profile(tmp_path, monkeypatch):
    import hgemm.sass as sass

    monkeypatch.setattr(sass, "find_cuda_tool", lambda name: None)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\0")
    assert sass.profile(cubin, "k") is None
    assert tensor_core_path({"HGMMA": 2, "HMMA": 1}) == "HGMMA (wgmma)"
    assert tensor_core_path({}) == "no tensor-core MMA (CUDA cores)"


def test_goals_table_takes_the_path_from_sass_when_read():
    from hgemm.summary import _instruction_path

    mix = {"path": "HMMA (mma.sync)", "instructions": 800, "counts": {"HMMA": 16}}
    # a kernel named wgmma_* that compiled to mma.sync is reported as what it is
    assert _instruction_path("wgmma_128x256x64_c2_s3_g8", {"sass": mix}) == "HMMA (mma.sync)"
    assert _instruction_path("wgmma_128x256x64_c2_s3_g8", {}) == "HGMMA (wgmma), by name (no SASS read)"

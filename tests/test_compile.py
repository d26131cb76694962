import shutil

import pytest

from conftest import ROOT
from hgemm.candidate import parse_candidate
from hgemm.compile import compile_candidate, parse_ptxas_report
from hgemm.entry import compile_entry

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 16 bytes cumulative stack size, 8704 bytes smem
"""


def test_ptxas_report_parsing():
    res = parse_ptxas_report(PTXAS, "k")
    assert (res.registers, res.barriers, res.smem_static, res.stack_frame, res.spill_stores, res.spill_loads) == \
        (40, 1, 8704, 16, 12, 8)
    assert parse_ptxas_report(PTXAS, "other") is None


@needs_nvcc
@pytest.mark.parametrize("name", ["naive", "smem_tiled", "mma_sync"])
def test_reference_kernels_compile_both_layouts(name, tmp_path):
    cand = parse_candidate((ROOT / f"kernels_corpus/reference/{name}.cu").read_text())
    for layout in ("NN", "TN"):
        res = compile_candidate(cand, layout, arch="sm_90a", cache_dir=tmp_path)
        assert res.ok, res.error
        assert res.resources.registers > 0
        assert (tmp_path / f"{res.key}.cubin").stat().st_size > 0


@needs_nvcc
def test_cache_hit_and_layout_keys(tmp_path):
    cand = parse_candidate((ROOT / "kernels_corpus/reference/naive.cu").read_text())
    first = compile_candidate(cand, "NN", arch="sm_90a", cache_dir=tmp_path)
    again = compile_candidate(cand, "NN", arch="sm_90a", cache_dir=tmp_path)
    tn = compile_candidate(cand, "TN", arch="sm_90a", cache_dir=tmp_path)
    assert not first.cached and again.cached and again.key == first.key and tn.key != first.key


@needs_nvcc
def test_compile_errors_are_results_not_exceptions(tmp_path):
    text = (ROOT / "kernels_corpus/reference/naive.cu").read_text().replace("fmaf(", "fmaff(")
    res = compile_candidate(parse_candidate(text), "NN", arch="sm_90a", cache_dir=tmp_path)
    assert not res.ok and "fmaff" in res.error


@needs_nvcc
def test_missing_extern_c_is_a_compile_error():
    text = (ROOT / "kernels_corpus/reference/naive.cu").read_text().replace('extern "C" __global__', '__global__')
    text = '// extern "C" mentioned only in a comment\n' + text
    entry, info = compile_entry("x", text, ("NN",), arch="sm_90a")
    assert entry is None and info["status"] == "compile_error" and "extern" in info["error"]


@needs_nvcc
def test_device_side_launch_does_not_compile():
    # no -rdc: a candidate cannot hide work in child grids on another stream
    entry, info = compile_entry("side", (ROOT / "tests/adversarial/side_stream.cu").read_text(), ("NN",), arch="sm_90a")
    assert entry is None and info["status"] == "compile_error"


def test_parse_error_is_classified():
    entry, info = compile_entry("bad", "/*@launch\nentry: k\n@*/", ("NN",))
    assert entry is None and info["status"] == "parse_error" and "'block'" in info["error"]

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
@pytest.mark.parametrize("name", ["naive", "smem_tiled", "mma_sync", "mma_pipelined"])
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


@needs_nvcc
def test_concurrent_compiles_of_one_kernel_share_the_cache(tmp_path):
    """Threads compiling the same text at once (a bench naming one kernel twice) must all succeed."""
    from concurrent.futures import ThreadPoolExecutor

    cand = parse_candidate((ROOT / "kernels_corpus/reference/naive.cu").read_text())
    with ThreadPoolExecutor(max_workers=6) as ex:
        results = list(ex.map(lambda _: compile_candidate(cand, "NN", arch="sm_90a", cache_dir=tmp_path), range(6)))
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({r.key for r in results}) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_atomic_copy_survives_concurrent_writers(tmp_path):
    """Many writers publishing one cache file at once: every call succeeds and the file is whole.
    (A temporary name shared between writers made the loser's rename fail.)"""
    from concurrent.futures import ThreadPoolExecutor

    from hgemm.compile import _atomic_copy

    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * 4096)
    dst = tmp_path / "cache" / "key.cubin"
    dst.parent.mkdir()
    with ThreadPoolExecutor(max_workers=8) as ex:
        list(ex.map(lambda _: _atomic_copy(src, dst), range(400)))
    assert dst.read_bytes() == src.read_bytes()
    assert [p.name for p in dst.parent.iterdir()] == ["key.cubin"]


# ---------------------------------------------------------------- the device headers

HEADER_KERNEL = """#include <hgemm/probe.cuh>
/*@launch
entry: k
block: 32
grid: 1
@*/
extern "C" __global__ void k(const __half* A, const __half* B, __half* C, int M, int N, int K, int batch,
                             void* workspace) {
  if (threadIdx.x == 0) C[0] = __float2half(hgemm_probe());
}
"""


def _probe_include(root, value: int):
    (root / "hgemm").mkdir(parents=True, exist_ok=True)
    (root / "hgemm" / "probe.cuh").write_text(
        f"#pragma once\n#include <cuda_fp16.h>\n__device__ inline float hgemm_probe() {{ return {value}.f; }}\n")
    return root


def test_the_include_hash_covers_every_header_file(tmp_path):
    from hgemm.compile import include_hash

    inc = _probe_include(tmp_path / "inc", 1)
    before = include_hash(inc)
    assert include_hash(inc) == before
    (inc / "hgemm" / "probe.cuh").write_text((inc / "hgemm" / "probe.cuh").read_text() + "// a comment\n")
    assert include_hash(inc) != before
    (inc / "hgemm" / "other.cuh").write_text("#pragma once\n")
    assert len({before, include_hash(inc)}) == 2


@needs_nvcc
def test_a_header_edit_invalidates_cached_cubins(tmp_path):
    inc = _probe_include(tmp_path / "inc", 1)
    cache = tmp_path / "cache"
    # the parser checks <hgemm/...> against the package's headers: build the candidate directly
    from hgemm.candidate import Candidate, parse_spec

    cand = Candidate(HEADER_KERNEL, parse_spec(HEADER_KERNEL))
    first = compile_candidate(cand, "NN", arch="sm_90a", cache_dir=cache, include_dir=inc)
    again = compile_candidate(cand, "NN", arch="sm_90a", cache_dir=cache, include_dir=inc)
    assert first.ok, first.error
    assert again.cached and again.key == first.key
    _probe_include(inc, 2)
    edited = compile_candidate(cand, "NN", arch="sm_90a", cache_dir=cache, include_dir=inc)
    assert edited.ok and not edited.cached and edited.key != first.key
    assert (cache / f"{first.key}.cubin").read_bytes() != (cache / f"{edited.key}.cubin").read_bytes()


@needs_nvcc
def test_compile_sees_no_include_path_of_the_environment(tmp_path, monkeypatch):
    """CPATH (and the like) would put a folder of the machine before the system headers: a stdint.h
    there must not be what the candidate gets."""
    leak = tmp_path / "leak"
    leak.mkdir()
    (leak / "stdint.h").write_text('#error "a header from the environment was included"\n')
    monkeypatch.setenv("CPATH", str(leak))
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", str(leak))
    monkeypatch.setenv("NVCC_APPEND_FLAGS", f"-I{leak}")
    text = "#include <stdint.h>\n" + (ROOT / "kernels_corpus/reference/naive.cu").read_text()
    res = compile_candidate(parse_candidate(text), "NN", arch="sm_90a", cache_dir=tmp_path / "cache")
    assert res.ok, res.error


@needs_nvcc
def test_header_errors_name_the_header_not_the_machine_path(tmp_path):
    from hgemm.candidate import Candidate, parse_spec

    inc = _probe_include(tmp_path / "inc", 1)
    (inc / "hgemm" / "probe.cuh").write_text("#pragma once\n__device__ inline float hgemm_probe() { return nope; }\n")
    res = compile_candidate(Candidate(HEADER_KERNEL, parse_spec(HEADER_KERNEL)), "NN", arch="sm_90a",
                            cache_dir=tmp_path / "cache", include_dir=inc)
    assert not res.ok and "hgemm/probe.cuh(2): error" in res.error and str(inc) not in res.error


@needs_nvcc
def test_the_mma_sync_example_compiles_through_the_harness(tmp_path):
    """docs/examples/mma_sync_odd.cu: a kernel composed from <hgemm/common.cuh> pieces, with its spec."""
    entry, info = compile_entry("mma_sync_odd", (ROOT / "docs/examples/mma_sync_odd.cu").read_text(), arch="sm_90a")
    assert entry is not None, info
    for layout, res in info["resources"].items():
        assert res["spill_stores"] == res["spill_loads"] == 0 and res["registers"] <= 255, (layout, res)


@needs_nvcc
def test_the_harness_utility_kernels_compile(tmp_path):
    # hgemm/utilities.cu: the spin and shared-memory scrub kernels every evaluation loads
    cand = parse_candidate((ROOT / "hgemm" / "utilities.cu").read_text())
    res = compile_candidate(cand, arch="sm_90a", cache_dir=tmp_path)
    assert res.ok, res.error
    assert cand.spec.entry == "hgemm_spin" and "hgemm_scrub_smem" in cand.source

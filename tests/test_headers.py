"""The device headers (hgemm/include/hgemm): each compiles on its own, the documented example kernel
compiles clean in both layouts, and the wgmma family's renders are short texts over them."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT
from hgemm.candidate import parse_candidate
from kernels_corpus.build import token_counter
from kernels_corpus.families import wgmma

NVCC = shutil.which("nvcc")
INCLUDE = ROOT / "hgemm" / "include"
HEADERS = sorted(p.name for p in (INCLUDE / "hgemm").glob("*.cuh"))
WGMMA_HEADERS = ["tma.cuh", "wgmma.cuh", "warpgroup.cuh", "epilogue.cuh", "cluster.cuh", "cluster_splitk.cuh", "staged_loader.cuh",
                 "scheduler.cuh", "streamk.cuh", "wgmma_gemm.cuh"]
EXAMPLE = ROOT / "docs" / "examples" / "wgmma_persistent.cu"


def _nvcc(src, out, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([NVCC, "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-Xptxas", "-v",
                           "-I", str(INCLUDE), *flags, str(src), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)


def test_the_wgmma_headers_are_there():
    assert set(WGMMA_HEADERS) <= set(HEADERS)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_each_header_compiles_alone(tmp_path):
    """A kernel may include any one piece: each header brings what it needs, and twice is harmless."""
    def one(name):
        src = tmp_path / f"{name}.cu"
        src.write_text(f"#include <hgemm/{name}>\n#include <hgemm/{name}>\n")
        r = _nvcc(src, tmp_path / f"{name}.cubin")
        assert r.returncode == 0, (name, r.stderr[-2000:])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, WGMMA_HEADERS))


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_the_wgmma_example_compiles_clean(tmp_path):
    """docs/examples/wgmma_persistent.cu, the header-API example: a valid candidate, and for both layouts
    HGMMA code without spills, within the register cap of one CTA of its block size."""
    text = EXAMPLE.read_text()
    spec = parse_candidate(text).spec
    assert spec.layouts == ("NN", "TN") and spec.block == (384, 1, 1)
    for layout, flags in (("NN", ()), ("TN", ("-DHGEMM_LAYOUT_TN",))):
        r = _nvcc(EXAMPLE, tmp_path / f"example_{layout}.cubin", *flags)
        assert r.returncode == 0, r.stderr[-4000:]
        assert f"Compiling entry function '{spec.entry}'" in r.stderr
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", r.stderr)]
        assert spills and not any(spills), r.stderr
        assert int(re.search(r"Used (\d+) registers", r.stderr).group(1)) <= 168
        assert "C7508" not in r.stderr and "serializ" not in r.stderr.lower(), r.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_the_register_split_moves_registers_only_where_the_accumulators_need_them(tmp_path):
    """warpgroup.cuh's RegisterSplit, checked by the compiler: two consumers take the producer's
    registers (232 a thread); two CTAs an SM of one consumer do where 128 accumulators a thread would not
    fit beside the rest in 128 (216), not with 64 or fewer; one CTA of one consumer never does."""
    src = tmp_path / "split.cu"
    src.write_text("""#include <hgemm/warpgroup.cuh>
using namespace hgemm::sm90;
static_assert(RegisterSplit<2, 1, 128>::kReallocate && RegisterSplit<2, 1, 128>::kConsumer == 232, "");
static_assert(RegisterSplit<2, 1, 64>::kReallocate && RegisterSplit<2, 1, 64>::kLaunch == 168, "");
static_assert(RegisterSplit<1, 2, 128>::kReallocate && RegisterSplit<1, 2, 128>::kConsumer == 216, "");
static_assert(RegisterSplit<1, 2, 128>::kLaunch == 128 && RegisterSplit<1, 2, 128>::kProducer == 40, "");
static_assert(!RegisterSplit<1, 2, 64>::kReallocate && !RegisterSplit<1, 2, 32>::kReallocate, "");
static_assert(!RegisterSplit<1, 1, 128>::kReallocate, "");
""")
    r = _nvcc(src, tmp_path / "split.cubin")
    assert r.returncode == 0, r.stderr[-2000:]


def test_wgmma_renders_are_short_instantiations():
    """A render is the include, the spec and one entry that instantiates the template: under 1,000
    bytes, so under 1,000 tokens for any byte-level tokenizer, and no CUDA beyond the entry."""
    count, _ = token_counter(None)
    for p in wgmma.variants():
        text = wgmma.render(p)
        assert len(text.encode()) < 1000 and count(text) < 400, wgmma.name(p)
        code = re.sub(r"/\*@launch.*?@\*/", "", text, flags=re.S)
        assert re.findall(r"#include <([^>]+)>", code) == ["hgemm/wgmma_gemm.cuh"]
        assert code.count(";") == 2 and f"wgmma_gemm<{wgmma.template_args(p)}>(" in code   # using + the call


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_the_wgmma_example_verifies_on_edge_shapes(layout):
    """The example kernel passes every awkward shape whose pitches TMA accepts and is `unsupported` on
    the others, as the family kernels are (tests/test_gpu_families.py)."""
    from hgemm.entry import EvalOptions
    from hgemm.judge import KernelJudge
    from hgemm.library import tma_compatible
    from hgemm.problem import Problem
    from test_gpu_families import EDGE, TMA_EDGE

    text = EXAMPLE.read_text()
    cand = parse_candidate(text)
    problems = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE + TMA_EDGE]
    with KernelJudge(EvalOptions(timing=False)) as judge:
        (verdict,) = judge.judge([text], [problems])
    bad = [(r["problem"], r["status"], r.get("error", "")[:300]) for r in verdict["results"]
           if r["status"] != ("ok" if tma_compatible(cand, Problem.from_dict(r["problem"])) else "unsupported")]
    assert verdict["results"] and not bad, bad or verdict.get("error")

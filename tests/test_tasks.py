"""The general-kernel task suite (kernels_corpus.tasks): shape of the data, inputs, tolerances, and
that every reference solution parses, matches the task's ABI, launches at every size and compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hgemm.candidate import parse_candidate  # noqa: E402
from kernels_corpus.tasks import get_task, load_tasks, upcast_float64  # noqa: E402
from kernels_corpus.tasks.base import torch_dtype  # noqa: E402

TASKS = load_tasks()
IDS = [t.name for t in TASKS]
H200_SMS = 132
# The largest size must be timeable: >= ~10 us at the H200's ~4.8 TB/s is ~48 MB of traffic, or for
# compute-bound tasks ~1 GFLOP.
MIN_TIMED_BYTES = 48 * 2**20
MIN_TIMED_FLOPS = 1e9


def _tensor_bytes(task, sizes) -> int:
    total = 0
    for p in task.params:
        if p.is_tensor:
            numel = 1
            for d in p.shape_for(sizes):
                numel *= d
            total += numel * torch.tensor([], dtype=torch_dtype(p.dtype)).element_size()
    return total


def _entry_params(source: str, entry: str) -> str:
    """The parameter list of the entry's definition, whitespace-normalised."""
    m = re.search(r"__global__[^;{]*?\b" + re.escape(entry) + r"\s*\(", source)
    assert m, f"no __global__ definition of {entry}"
    depth, start = 1, m.end()
    for pos in range(start, len(source)):
        depth += {"(": 1, ")": -1}.get(source[pos], 0)
        if depth == 0:
            return _normalise("(" + source[start:pos] + ")")
    raise AssertionError(f"unbalanced parameter list for {entry}")


def _normalise(signature: str) -> str:
    s = re.sub(r"\s+", " ", signature)
    return s.replace("( ", "(").replace(" )", ")").replace(" ,", ",")


def test_suite_size_and_unique_names():
    assert len(TASKS) >= 24
    assert len(set(IDS)) == len(IDS)
    assert get_task("gemm_f16").name == "gemm_f16"
    with pytest.raises(KeyError):
        get_task("no_such_task")


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_task_declaration(task):
    assert task.description and task.outputs and task.inputs
    assert task.atol >= 0 and task.rtol >= 0
    for sizes in task.sizes:
        assert set(sizes) == set(task.variables), f"sizes {sizes} do not name exactly {task.variables}"
        for p in task.params:
            if p.is_tensor:
                assert all(d >= 1 for d in p.shape_for(sizes)), (p.name, sizes)
            else:
                p.value_for(sizes)
    smoke, largest = task.sizes[0], task.sizes[-1]
    assert _tensor_bytes(task, smoke) < 2**20, "the first size must be a small smoke size"
    flops = 2 * largest["M"] * largest["N"] * largest["K"] if {"M", "N", "K"} <= set(largest) else 0
    assert _tensor_bytes(task, largest) >= MIN_TIMED_BYTES or flops >= MIN_TIMED_FLOPS
    prompt = task.prompt(smoke)
    assert task.c_signature() in prompt and task.name in prompt


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_make_inputs(task):
    for sizes in task.sizes[:2]:
        inputs = task.make_inputs(sizes, torch.Generator().manual_seed(1))
        assert set(inputs) == {p.name for p in task.inputs}
        for p in task.inputs:
            t = inputs[p.name]
            assert t.device.type == "cpu" and t.is_contiguous()
            assert tuple(t.shape) == p.shape_for(sizes), (p.name, sizes)
            assert t.dtype == torch_dtype(p.dtype), p.name
            assert bool(t.ne(0).any()), f"{p.name} is all zeros"
            assert bool(torch.isfinite(t).all()) if t.is_floating_point() else True
        again = task.make_inputs(sizes, torch.Generator().manual_seed(1))
        other = task.make_inputs(sizes, torch.Generator().manual_seed(2))
        assert all(torch.equal(inputs[k], again[k]) for k in inputs), "not deterministic for a seed"
        assert any(not torch.equal(inputs[k], other[k]) for k in inputs), "ignores the seed"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_compute_native_matches_float64_within_tolerance(task):
    # The smoke and middle sizes: the native (fp32/fp16) torch result must pass the same check a
    # kernel must pass, else the tolerance is too tight for an honest implementation.
    for sizes in task.sizes[:2]:
        inputs = task.make_inputs(sizes, torch.Generator().manual_seed(0))
        reference = task.compute(upcast_float64(inputs), sizes)
        native = task.compute(inputs, sizes)
        assert set(reference) == set(native) == {p.name for p in task.outputs}
        for p in task.outputs:
            ref, got = reference[p.name], native[p.name]
            assert tuple(ref.shape) == tuple(got.shape) == p.shape_for(sizes), (p.name, sizes)
            assert got.dtype == torch_dtype(p.dtype), f"native compute gives {got.dtype} for {p.name}"
            if p.dtype.startswith("float"):
                assert ref.dtype == torch.float64
            err = (got.double() - ref.double()).abs()
            bound = task.atol + task.rtol * ref.double().abs()
            worst = (err - bound).max().item()
            assert worst <= 0, f"{p.name} at {sizes}: exceeds atol + rtol * |ref| by {worst:.3g}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_solution_parses_and_matches_abi(task):
    cand = parse_candidate(task.solution, variables=task.variables)
    assert _entry_params(task.solution, cand.spec.entry) == _normalise(task.c_signature())
    for sizes in task.sizes:
        grid, block, smem, _ = cand.spec.launch_dims({**sizes, "num_sms": H200_SMS})
        assert smem <= 227 * 1024


def _nvcc_compile(task, out_dir: Path) -> tuple[str, int, str]:
    src = out_dir / f"{task.name}.cu"
    src.write_text(task.solution)
    cmd = ["nvcc", "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-o", str(out_dir / f"{task.name}.cubin"), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return task.name, proc.returncode, proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_every_solution_compiles_for_sm90a(tmp_path):
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: _nvcc_compile(t, tmp_path), TASKS))
    failures = [f"{name}:\n{err}" for name, rc, err in results if rc != 0]
    assert not failures, "\n\n".join(failures)
    warnings = [f"{name}: {err}" for name, rc, err in results if "warning" in err.lower()]
    assert not warnings, "\n".join(warnings)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_two_solutions_compile_for_sm90a(tmp_path):
    """The fast run's share of test_every_solution_compiles_for_sm90a (slow): the first and last task."""
    for name, rc, err in (_nvcc_compile(t, tmp_path) for t in (TASKS[0], TASKS[-1])):
        assert rc == 0, f"{name}:\n{err}"
        assert "warning" not in err.lower(), f"{name}: {err}"


def test_a_task_pickles_by_name():
    # how a task reaches an evaluation worker (hgemm.pool): its functions are lambdas, so by name
    task = get_task("softmax_rows_f32")
    data = ForkingPickler.dumps(task)
    assert len(data) < 200 and ForkingPickler.loads(data) is task

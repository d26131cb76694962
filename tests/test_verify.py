"""The correctness checks, on the CPU: honest fp32 accumulation passes, the known cheats fail."""

import math

import pytest
import torch

from hgemm.problem import Problem
from hgemm.verify import (GuardedBuffer, check_output, fingerprint, problem_inputs, random_tensor, redraw, reference,
                          shared_inputs, shared_intact)


def fp32_gemm(A, B, layout="NN"):
    b = B if layout == "NN" else B.transpose(-1, -2)
    return torch.matmul(A.float(), b.float()).half()


def fp16_accumulate(A, B, chunk=16):
    """What an fp16-accumulating kernel does: partial sums rounded to fp16 every `chunk` products."""
    acc = torch.zeros(A.shape[:-1] + (B.shape[-1],), dtype=torch.float16)
    for k0 in range(0, A.shape[-1], chunk):
        part = torch.matmul(A[..., k0:k0 + chunk].float(), B[..., k0:k0 + chunk, :].float())
        acc = (acc.float() + part).half()
    return acc


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.mark.parametrize("dist", ["normal", "uniform_pos", "small_int"])
@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_honest_fp32_kernel_passes(gen, dist, layout):
    p = Problem(33, 47, 1024, 2, layout)
    A, B = problem_inputs(p, dist, gen, "cpu")
    ref, absprod = reference(A.tensor, B.tensor, layout)
    report = check_output(fp32_gemm(A.tensor, B.tensor, layout), ref, absprod, p.K, exact=dist == "small_int")
    assert report.ok, report.detail
    assert report.max_err_over_tol < 1.0


def test_fp16_accumulation_fails_on_positive_inputs(gen):
    p = Problem(64, 64, 4096)
    A, B = problem_inputs(p, "uniform_pos", gen, "cpu")
    ref, absprod = reference(A.tensor, B.tensor, "NN")
    report = check_output(fp16_accumulate(A.tensor, B.tensor), ref, absprod, p.K)
    assert not report.ok and report.n_bad > 100


def test_bf16_inputs_fail(gen):
    p = Problem(64, 64, 2048)
    A, B = problem_inputs(p, "normal", gen, "cpu")
    ref, absprod = reference(A.tensor, B.tensor, "NN")
    cheat = torch.matmul(A.tensor.bfloat16().float(), B.tensor.bfloat16().float()).half()
    assert not check_output(cheat, ref, absprod, p.K).ok


def test_one_ulp_off_fails_the_exact_test(gen):
    p = Problem(16, 16, 64)
    A, B = problem_inputs(p, "small_int", gen, "cpu")
    ref, absprod = reference(A.tensor, B.tensor, "NN")
    C = fp32_gemm(A.tensor, B.tensor)
    assert check_output(C, ref, absprod, p.K, exact=True).ok
    i = int((C.flatten().abs() > 4).nonzero()[0])
    x = float(C.view(-1)[i])
    C.view(-1)[i] = x + 2.0 ** (math.floor(math.log2(abs(x))) - 10)  # one fp16 ulp away: within tolerance
    report = check_output(C, ref, absprod, p.K, exact=True)
    assert not report.ok and report.n_bad == 1


def test_unwritten_element_fails(gen):
    p = Problem(8, 8, 8)
    A, B = problem_inputs(p, "normal", gen, "cpu")
    ref, absprod = reference(A.tensor, B.tensor, "NN")
    C = GuardedBuffer(p.c_shape, torch.float16, "cpu", gen, guard_bytes=256)
    C.poison()
    C.tensor.copy_(fp32_gemm(A.tensor, B.tensor))
    C.tensor[0, 7, 7] = float("nan")
    report = check_output(C.tensor, ref, absprod, p.K)
    assert not report.ok and report.n_nan == 1 and "(0, 7, 7)" in report.detail


def test_guard_band_catches_writes_past_either_end(gen):
    for dtype in (torch.float16, torch.float32, torch.int64):
        buf = GuardedBuffer((4, 4), dtype, "cpu", gen, guard_bytes=256)
        assert buf.guards_intact()
        buf.tensor.fill_(3)  # writing every element in bounds leaves the guards alone
        assert buf.guards_intact()
        buf.flat[buf.guard + buf.nbytes] ^= 1  # one byte past the end
        assert not buf.guards_intact()
        buf = GuardedBuffer((4, 4), dtype, "cpu", gen, guard_bytes=256)
        buf.flat[buf.guard - 1] ^= 1  # one byte before the start
        assert not buf.guards_intact()


def test_poison_is_nan_for_floats(gen):
    buf = GuardedBuffer((3, 5), torch.float32, "cpu", gen, guard_bytes=256)
    buf.poison()
    assert torch.isnan(buf.tensor).all() and buf.guards_intact()


def test_inputs_are_never_zero_and_fresh_per_seed():
    for dist in ("normal", "uniform_pos", "small_int"):
        a = random_tensor((256, 256), dist, torch.Generator().manual_seed(1), "cpu")
        b = random_tensor((256, 256), dist, torch.Generator().manual_seed(2), "cpu")
        assert a.abs().sum() > 0 and not torch.equal(a, b)
        assert (a != 0).float().mean() > 0.5


@pytest.mark.parametrize("name", ["a0", "b0", "ref", "absprod"])
def test_shared_data_tells_a_write_into_it_and_draws_the_same_again(name):
    problem = Problem(33, 17, 65, 2, "TN")
    data = shared_inputs(problem, "normal", 5, "cpu")
    assert shared_intact(data)
    saved = data[name].clone()
    flat = data[name].view(-1)
    flat[flat.numel() // 2] = flat[flat.numel() // 2] * 2 + 1  # one element, as a stray store would
    assert not shared_intact(data)
    redraw(data, problem, "cpu")
    assert torch.equal(data[name], saved) and shared_intact(data)
    assert fingerprint(data["ref"]) != fingerprint(shared_inputs(problem, "normal", 6, "cpu")["ref"])


def test_shared_data_tells_a_changed_input_or_guard_band():
    problem = Problem(40, 24, 72)
    for change in (lambda d: d["A"].tensor.view(-1).__setitem__(3, 7.0),  # the guarded input itself
                   lambda d: d["B"].flat.__setitem__(0, d["B"].flat[0] ^ 1)):  # a byte of B's guard band
        data = shared_inputs(problem, "uniform_pos", 9, "cpu")
        change(data)
        assert not shared_intact(data)
        redraw(data, problem, "cpu")
        assert shared_intact(data)

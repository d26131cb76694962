"""hgemm.matmul as a torch operator, on the CPU: registration, the fake implementation under
torch.compile, the out= form, the gradient, the fallback for inputs the kernels do not take, and
dispatch decided once per shape. The GPU side (current stream, CUDA graphs) is tests/test_gpu_ops.py."""

import logging

import pytest

torch = pytest.importorskip("torch")

import hgemm  # noqa: E402
from conftest import ROOT, write_library  # noqa: E402
from hgemm import ops  # noqa: E402
from hgemm.problem import Problem  # noqa: E402

NAIVE = (ROOT / "kernels_corpus/reference/naive.cu").read_text()
MMA = (ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()


@pytest.fixture
def library(tmp_path):
    return str(write_library(tmp_path, {"generic": NAIVE, "big": MMA}, {Problem(4096, 4096, 4096).key: "big"},
                             "generic"))


def test_the_ops_are_registered_with_their_schemas():
    assert hgemm.matmul is ops.matmul
    assert "Tensor A, Tensor B, str library" in str(torch.ops.hgemm.matmul.default._schema)
    assert "!) out) -> ()" in str(torch.ops.hgemm.matmul_out.default._schema)


@pytest.mark.parametrize("shapes", [((8, 16), (16, 4)), ((3, 8, 16), (3, 16, 4)), ((2, 3, 8, 16), (16, 4)),
                                    ((8, 16), (3, 16, 4)), ((2, 1, 8, 16), (3, 16, 4))])
def test_fake_implementation_gives_the_product_shape(shapes):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(shapes[0], dtype=torch.float16)
        b = torch.empty(shapes[1], dtype=torch.float16)
        c = torch.ops.hgemm.matmul(a, b, "lib")
    want = torch.matmul(torch.empty(shapes[0]), torch.empty(shapes[1])).shape
    assert c.shape == want and c.dtype == torch.float16


def test_stacks_run_as_one_gemm_without_copying_a_contiguous_a_or_b():
    # an nn.Linear's input (batch, sequence, features) times its weight's transpose: one TN GEMM over
    # every row, A and B as they are
    x, w = torch.empty(2, 3, 40, 64, dtype=torch.float16), torch.empty(96, 64, dtype=torch.float16)
    g, why = ops._as_gemm(x, w.t())
    assert why == "" and g.problem == Problem(240, 96, 64, 1, "TN")
    assert g.a.data_ptr() == x.data_ptr() and g.b.data_ptr() == w.data_ptr()
    assert g.c(torch.empty(2, 3, 40, 96)).shape == (1, 240, 96)
    a, b = torch.empty(4, 5, 8, 16), torch.empty(4, 5, 16, 24)
    g, _ = ops._as_gemm(a, b)  # equal stacks: a batch of 20
    assert g.problem == Problem(8, 24, 16, 20, "NN") and g.b.data_ptr() == b.data_ptr()
    g, _ = ops._as_gemm(a, torch.empty(4, 5, 24, 16).transpose(-1, -2))
    assert g.problem == Problem(8, 24, 16, 20, "TN")
    for A, B in [(torch.empty(1, 8, 16), torch.empty(3, 16, 4)), (torch.empty(8, 16), torch.empty(3, 16, 4))]:
        g, why = ops._as_gemm(A, B)
        assert g is None and "broadcast" in why
    g, why = ops._as_gemm(torch.empty(8, 16), torch.empty(16, 8)[:, ::2])
    assert g is None and "neither contiguous" in why
    storage = torch.empty(16 * 8 + 1, dtype=torch.float16)
    g, why = ops._as_gemm(torch.empty(8, 16, dtype=torch.float16), storage[1:].view(16, 8))  # 2 bytes in
    assert g is None and "16-byte boundary" in why


@pytest.mark.parametrize("shapes", [((2, 3, 6, 5), (5, 3)), ((2, 6, 5), (2, 5, 3)), ((1, 6, 5), (4, 5, 3)), ((6, 5), (4, 5, 3))])
def test_gradient_of_stacks_is_the_matmul_gradient(library, shapes):
    a = torch.randn(*shapes[0], dtype=torch.float16, requires_grad=True)
    b = torch.randn(*shapes[1], dtype=torch.float16, requires_grad=True)
    weight = torch.randn(torch.matmul(a.detach(), b.detach()).shape)
    (hgemm.matmul(a, b, library=library).float() * weight).sum().backward()
    a2, b2 = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    ((a2 @ b2) * weight).sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert torch.allclose(a.grad.float(), a2.grad, atol=5e-2) and torch.allclose(b.grad.float(), b2.grad, atol=5e-2)


def test_opcheck_passes_on_the_fallback_path(library):
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    torch.library.opcheck(torch.ops.hgemm.matmul.default, (a, b, library),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compiles_without_a_graph_break(library):
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)

    def f(x, y):
        return hgemm.matmul(x, y, library=library) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    # fp16's rounding of the product, doubled: up to 2^-11 of it (atol alone fails where |a @ b| >= 16)
    assert torch.allclose(compiled(a, b).float(), (a.float() @ b.float()) * 2, atol=1e-2, rtol=2e-3)


def test_out_form_writes_and_returns_out_and_checks_its_shape(library):
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    out = torch.empty(8, 4, dtype=torch.float16)
    assert hgemm.matmul(a, b, out=out, library=library) is out
    assert torch.allclose(out.float(), a.float() @ b.float(), atol=1e-2)
    with pytest.raises(ValueError, match="out is"):
        hgemm.matmul(a, b, out=torch.empty(4, 8, dtype=torch.float16), library=library)


def test_shapes_that_do_not_multiply_are_a_clear_error(library):
    with pytest.raises(ValueError, match="do not multiply"):
        hgemm.matmul(torch.randn(8, 16).half(), torch.randn(15, 4).half(), library=library)


def test_gradient_is_the_matmul_gradient(library):
    a = torch.randn(6, 5, dtype=torch.float16, requires_grad=True)
    b = torch.randn(5, 3, dtype=torch.float16, requires_grad=True)
    (hgemm.matmul(a, b, library=library).float() * torch.arange(18.).view(6, 3)).sum().backward()
    a2, b2 = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    ((a2 @ b2) * torch.arange(18.).view(6, 3)).sum().backward()
    assert torch.allclose(a.grad.float(), a2.grad, atol=5e-2) and torch.allclose(b.grad.float(), b2.grad, atol=5e-2)


def test_unserved_inputs_run_torch_matmul_with_a_reason(library, caplog):
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with caplog.at_level(logging.INFO, logger="hgemm.ops"):
        out = hgemm.matmul(a, b, library=library)
    assert torch.allclose(out, a @ b)
    assert "runs torch.matmul" in caplog.text and "dtypes" in caplog.text


def test_without_a_gpu_it_warns_once(library, monkeypatch, recwarn):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ops, "_said", set())
    a, b = torch.randn(4, 8, dtype=torch.half), torch.randn(8, 2, dtype=torch.half)
    for _ in range(3):
        assert torch.equal(hgemm.matmul(a, b, library=library), torch.matmul(a, b))
    warned = [w for w in recwarn if issubclass(w.category, RuntimeWarning) and "hgemm.matmul" in str(w.message)]
    assert len(warned) == 1 and "no CUDA GPU" in str(warned[0].message)


def test_dispatch_is_decided_once_per_shape(library, monkeypatch):
    from hgemm.library import Library

    calls = []
    real = Library.lookup
    monkeypatch.setattr(Library, "lookup", lambda self, p: calls.append(p.key) or real(self, p))
    monkeypatch.setattr(ops, "_choices", {})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # no kernel to load here
    for _ in range(3):
        assert ops.dispatch(library, Problem(4096, 4096, 4096)).name == "big"
        assert ops.dispatch(library, Problem(24, 40, 50)).name == "big"
    assert calls == [Problem(4096, 4096, 4096).key, Problem(24, 40, 50).key]


def test_a_missing_library_is_a_clear_error(tmp_path):
    from hgemm.ops import dispatch
    from hgemm.problem import Problem

    with pytest.raises(FileNotFoundError, match="no kernel library at .*snakemake --cores all"):
        dispatch(str(tmp_path / "nowhere"), Problem(64, 64, 64))


def test_kept_workspaces_stay_within_their_budget(monkeypatch):
    # one filled workspace per kernel, shape and stream; the oldest go once the budget would be passed
    monkeypatch.setattr(ops, "_kept", {})
    monkeypatch.setattr(ops, "KEPT_BYTES", 1000)
    cpu = torch.device("cpu")
    first = ops._kept_workspace("k", Problem(64, 64, 64), 400, cpu, 0)
    assert ops._kept_workspace("k", Problem(64, 64, 64), 400, cpu, 0) is first and not first.any()
    assert ops._kept_workspace("k", Problem(64, 64, 64), 400, cpu, 7) is not first  # another stream
    ops._kept_workspace("k", Problem(64, 64, 128), 400, cpu, 0)  # 1200 bytes: the first goes
    assert len(ops._kept) == 2 and ops._kept_workspace("k", Problem(64, 64, 64), 400, cpu, 0) is not first

"""GPU: torch.ops.hgemm.matmul on torch's current stream, inside a CUDA graph, under torch.compile and
with out=, each against a float64 product of the same fresh random inputs."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

import hgemm  # noqa: E402
from conftest import ROOT  # noqa: E402

# the tuned library the repository ships (benchmarks/tune); any tune folder works
LIBRARY = ROOT / "benchmarks" / "tune"
SHAPES = [(1024, 1024, 1024, 1, "NN"), (4095, 4096, 4096, 1, "NN"), (300, 1000, 777, 3, "TN"),
          (16, 4096, 4096, 1, "NN"), (4096, 4104, 4096, 1, "TN")]


def operands(M, N, K, batch, layout, gen):
    shape = (batch,) if batch > 1 else ()
    a = torch.randn(*shape, M, K, device="cuda", dtype=torch.float16, generator=gen)
    if layout == "TN":
        b = torch.randn(*shape, N, K, device="cuda", dtype=torch.float16, generator=gen).transpose(-1, -2)
    else:
        b = torch.randn(*shape, K, N, device="cuda", dtype=torch.float16, generator=gen)
    return a, b


def close(c, a, b):
    ref = torch.matmul(a.double(), b.double())
    return (c.double() - ref).abs().max().item() <= 2**-9 * ref.abs().max().item() + 1e-2


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_on_a_side_stream(shape):
    gen = torch.Generator("cuda").manual_seed(1)
    a, b = operands(*shape, gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        c = hgemm.matmul(a, b, library=LIBRARY)
        c2 = c * 1  # ordered after the kernel on the same stream
    torch.cuda.current_stream().wait_stream(side)
    assert close(c2, a, b)


def test_captured_in_a_cuda_graph_and_replayed_on_new_inputs():
    gen = torch.Generator("cuda").manual_seed(2)
    a, b = operands(2048, 2048, 2048, 1, "NN", gen)
    out = torch.empty(2048, 2048, device="cuda", dtype=torch.float16)
    hgemm.matmul(a, b, out=out, library=LIBRARY)  # compile, load and dispatch outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hgemm.matmul(a, b, out=out, library=LIBRARY)
    for _ in range(3):
        a.copy_(torch.randn(a.shape, device="cuda", dtype=torch.float16, generator=gen))
        b.copy_(torch.randn(b.shape, device="cuda", dtype=torch.float16, generator=gen))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert close(out, a, b)


def test_under_torch_compile():
    gen = torch.Generator("cuda").manual_seed(3)
    a, b = operands(512, 768, 1024, 4, "NN", gen)
    f = torch.compile(lambda x, y: torch.relu(hgemm.matmul(x, y, library=LIBRARY)), fullgraph=True)
    c = f(a, b)
    ref = torch.relu(torch.matmul(a.double(), b.double()))
    assert (c.double() - ref).abs().max().item() <= 2**-9 * ref.abs().max().item() + 1e-2


def test_gradient_through_the_kernels():
    gen = torch.Generator("cuda").manual_seed(4)
    a, b = operands(256, 512, 384, 1, "NN", gen)
    a.requires_grad_()
    b.requires_grad_()
    g = torch.randn(256, 512, device="cuda", dtype=torch.float16, generator=gen)
    hgemm.matmul(a, b, library=LIBRARY).backward(g)
    assert close(a.grad, g, b.detach().t()) and close(b.grad, a.detach().t(), g)


def test_a_view_that_starts_off_a_16_byte_boundary_runs_torch_matmul(caplog):
    import logging

    storage = torch.randn(512 * 384 + 1, device="cuda", dtype=torch.float16)
    a = storage[1:].view(512, 384)  # 2 bytes past an aligned start: TMA would refuse it
    b = torch.randn(384, 256, device="cuda", dtype=torch.float16)
    with caplog.at_level(logging.INFO, logger="hgemm.ops"):
        c = hgemm.matmul(a, b, library=LIBRARY)
    assert close(c, a, b) and "16-byte boundary" in caplog.text


def test_a_linear_layers_stack_of_inputs_and_its_weight(caplog):
    """(batch, sequence, features) @ weight.t(): one TN GEMM over every row through the kernels (nothing
    falls back to torch.matmul), and the gradient of both through them too."""
    import logging

    gen = torch.Generator("cuda").manual_seed(8)
    x = torch.randn(4, 77, 1000, device="cuda", dtype=torch.float16, generator=gen, requires_grad=True)
    w = torch.randn(3001, 1000, device="cuda", dtype=torch.float16, generator=gen, requires_grad=True)
    g = torch.randn(4, 77, 3001, device="cuda", dtype=torch.float16, generator=gen)
    with caplog.at_level(logging.INFO, logger="hgemm.ops"):
        y = hgemm.matmul(x, w.t(), library=LIBRARY)
        y.backward(g)
    assert "runs torch.matmul" not in caplog.text, caplog.text
    assert close(y.detach().reshape(-1, 3001), x.detach().reshape(-1, 1000), w.detach().t())
    assert close(x.grad.reshape(-1, 1000), g.reshape(-1, 3001), w.detach())
    assert close(w.grad, g.reshape(-1, 3001).t(), x.detach().reshape(-1, 1000))
    a, b = operands(96, 250, 250, 40, "NN", gen)
    c = hgemm.matmul(a.reshape(5, 8, 96, 250), b.reshape(5, 8, 250, 250), library=LIBRARY)
    assert c.shape == (5, 8, 96, 250) and close(c.reshape(40, 96, 250), a, b)


@pytest.mark.parametrize("shape", [(1024, 1024, 1024, 1, "NN"), (320, 640, 192, 2, "TN")],
                         ids=["dispatched-before", "first-call-in-the-thread"])
def test_from_a_thread_without_a_current_context(shape):
    # a new thread has no driver context current until something binds one; the op binds its own
    gen = torch.Generator("cuda").manual_seed(5)
    a, b = operands(*shape, gen)
    if shape[0] == 1024:
        hgemm.matmul(a, b, library=LIBRARY)
    result = {}

    def call():
        try:
            result["c"] = hgemm.matmul(a, b, library=LIBRARY)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - carried to the main thread's assertion
            result["error"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    worker.join()
    assert "error" not in result, result.get("error")
    assert close(result["c"], a, b)


@pytest.mark.parametrize("shape", [(1000, 3001, 515, 1, "TN"), (2688, 5, 64, 1, "NN"), (96, 250, 250, 40, "NN")],
                         ids=lambda s: "x".join(map(str, s)))
def test_a_library_that_autotunes_serves_the_fastest_verified_of_its_search(tmp_path, shape):
    """A shape the library has no entry for: the first call times the rule's pick and the cost model's
    first 4 kernels, every later call launches the kernel it kept, and the product is right."""
    from hgemm import autotune, ops
    from hgemm.library import Library, merge_libraries
    from hgemm.problem import Problem

    merge_libraries([LIBRARY], tmp_path, autotune=4)
    gen = torch.Generator("cuda").manual_seed(6)
    a, b = operands(*shape, gen)
    rng = torch.cuda.get_rng_state()
    assert close(hgemm.matmul(a, b, library=tmp_path), a, b)
    assert torch.equal(torch.cuda.get_rng_state(), rng)  # the search's scratch data leaves the caller's RNG alone
    p = Problem(*shape)
    lib = Library(tmp_path)
    searched = [c.name for c in autotune.candidates(lib, p, lib.lookup(p), 4)]
    kept = ops.dispatch(str(tmp_path), p)
    assert kept.name in searched and ops.dispatch(str(tmp_path), p) is kept  # decided once
    a2, b2 = operands(*shape, gen)
    assert close(hgemm.matmul(a2, b2, library=tmp_path), a2, b2)


def test_the_searchs_stream_timer_times_the_gpu_and_not_the_host():
    """The search's default timer queues each batch behind a spin: a launcher that spends 0.3 ms of host
    time a launch (far longer than the kernel) gets the kernel's time all the same, the spin lengthened
    until the batch is no longer starved; and it times what the graph replay times, plus the front end's
    work for each stream launch (about a microsecond: benchmarks/autotune/)."""
    import time

    from hgemm import autotune, ops
    from hgemm.library import Library
    from hgemm.problem import Problem

    p = Problem(512, 512, 512)
    choice = Library(LIBRARY).lookup(p)
    kernel, dims = ops._loaded(choice, p)
    assert not dims[3]  # no workspace to fill

    def run(a, b, c):
        ops._launch(choice, kernel, dims, p, a, b, c)

    def slow_host(a, b, c):
        time.sleep(3e-4)
        run(a, b, c)

    rows = autotune.SampledRows(p, torch.device("cuda"))
    assert rows.check(run) == ""
    stream_us, graph_us, slow_us = rows.time_us(run), rows.time_us(run, "graph"), rows.time_us(slow_host)
    assert 0 < graph_us <= stream_us * 1.05 and stream_us < graph_us + 3
    assert slow_us < stream_us * 1.25


KEPT_ZERO = [("mma_sync_16x128x64_w1x4_s3_g8_sk8_mp", (64, 125, 2267, 1, "TN")),
             ("wgmma_128x128x64_c2_s5_g8_es_staged", (647, 448, 91, 1, "TN")),
             ("wgmma_128x64x64_c1_s6_g8_sk4_staged", (87, 384, 1589, 1, "TN")),
             ("skinny_tn_m8_npw4_sk16", (8, 3000, 4099, 1, "TN")),
             ("skinny_nn_m1_bn256_sk4", (1, 4096, 4096, 2, "NN")),
             ("wgmma_64x64x64_c1_s6_g8_stk8_es", (128, 512, 7616, 1, "NN")),
             ("wgmma_128x128x64_c1_s5_g8_stk8_es_staged", (559, 101, 6643, 1, "TN"))]


@pytest.mark.parametrize("name,shape", KEPT_ZERO, ids=lambda x: x if isinstance(x, str) else "x".join(map(str, x)))
def test_a_kernel_that_keeps_its_workspace_zero_serves_call_after_call(tmp_path, name, shape):
    """Split-K reductions, stream-K's slots and flags and the staged grid barrier leave their workspace
    zero (`workspace_zero: kept`): hgemm.matmul fills it once, so every call after the first relies on
    the kernel having cleared it, on the stream it runs on and in a graph replayed again and again."""
    from conftest import write_library
    from hgemm.candidate import parse_candidate
    from hgemm.cost import family_text
    from hgemm.problem import Problem

    text = family_text(name)
    assert not parse_candidate(text).spec.zero_each_launch
    write_library(tmp_path, {name: text}, {Problem(*shape).key: name}, name)
    gen = torch.Generator("cuda").manual_seed(7)
    for _ in range(3):
        a, b = operands(*shape, gen)
        assert close(hgemm.matmul(a, b, library=tmp_path), a, b)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a, b = operands(*shape, gen)
        c = hgemm.matmul(a, b, library=tmp_path)
    side.synchronize()
    assert close(c, a, b)
    a, b = operands(*shape, gen)
    out = hgemm.matmul(a, b, library=tmp_path)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hgemm.matmul(a, b, out=out, library=tmp_path)
    for _ in range(3):
        a2, b2 = operands(*shape, gen)
        a.copy_(a2)
        b.copy_(b2)
        graph.replay()
        torch.cuda.synchronize()
        assert close(out, a2, b2)

import struct

import pytest

from conftest import ROOT

from hgemm.params import Param, pack_params


def test_gemm_abi_layout():
    buf = pack_params([Param("P", 0x1000), Param("P", 0x2000), Param("P", 0x3000), Param("i", 5), Param("i", 6),
                       Param("i", 7), Param("i", 2), Param("P", 0)])
    assert len(buf) == 3 * 8 + 4 * 4 + 8
    assert struct.unpack_from("<3Q4iQ", buf) == (0x1000, 0x2000, 0x3000, 5, 6, 7, 2, 0)


def test_driver_layout_places_tensor_maps():
    # The layout ptxas 13.0 gives a wgmma candidate on sm_90a (read from its cubin's EIATTR_KPARAM_INFO):
    # the maps sit at 0x70 and 0xF0 because parameters start at constant-bank address 0x210 and each
    # CUtensorMap's absolute address is 128-byte aligned. Natural packing from zero would put the first
    # at 0x40 and the kernel would read garbage descriptors.
    layout = [(0x0, 8), (0x8, 8), (0x10, 8), (0x18, 4), (0x1C, 4), (0x20, 4), (0x24, 4), (0x28, 8),
              (0x70, 128), (0xF0, 128)]
    tmap_a, tmap_b = bytes(range(128)), bytes(range(128, 256))
    params = [Param("P", 1), Param("P", 2), Param("P", 3), Param("i", 4), Param("i", 5), Param("i", 6),
              Param("i", 7), Param("P", 0), Param("T", tmap_a), Param("T", tmap_b)]
    buf = pack_params(params, layout)
    assert len(buf) == 0x170
    assert buf[0x70:0xF0] == tmap_a and buf[0xF0:0x170] == tmap_b
    assert struct.unpack_from("<3Q4iQ", buf) == (1, 2, 3, 4, 5, 6, 7, 0)
    assert pack_params(params)[0x40:0xC0] == tmap_a  # the natural packing, for contrast


def test_signature_mismatch_is_a_spec_error():
    from hgemm.candidate import SpecError

    params = [Param("P", 1), Param("i", 2)]
    with pytest.raises(SpecError, match="takes 3 parameters"):
        pack_params(params, [(0, 8), (8, 4), (12, 4)])
    with pytest.raises(SpecError, match="parameter 1 is 8 bytes"):
        pack_params(params, [(0, 8), (8, 8)])


def test_tensor_map_arguments_reach_the_driver():
    # The bindings take cuuint64_t/cuuint32_t objects; plain ints raise TypeError before any driver
    # call. Here (no GPU) the call must get as far as the driver: refused (ValueError) or no driver library.
    pytest.importorskip("cuda.bindings.driver")
    from types import SimpleNamespace

    from hgemm.tensormap import encode_tensor_map

    fake = SimpleNamespace(shape=(2, 256, 128), data_ptr=lambda: 1 << 20)
    try:
        encode_tensor_map(fake, (128, 64), 128)
    except ValueError:
        pass
    except (TypeError, OverflowError, struct.error):
        raise
    except Exception as e:  # noqa: BLE001 - the driver library is absent on a CPU-only machine
        assert "driver" in str(e).lower(), e
    with pytest.raises(ValueError, match="16-byte aligned rows"):
        encode_tensor_map(SimpleNamespace(shape=(1, 8, 33), data_ptr=lambda: 0), (8, 33), 128)


def test_gemm_param_buffer_packs_the_abi():
    import torch

    from hgemm.candidate import parse_candidate
    from hgemm.params import gemm_param_buffer
    from hgemm.problem import Problem
    from conftest import read_kernel

    spec = parse_candidate(read_kernel("kernels_corpus/reference/naive.cu")).spec
    a, b, c, w = (torch.empty(4) for _ in range(4))
    buf = gemm_param_buffer(spec, Problem(5, 6, 7, 2), a, b, c, w)
    assert struct.unpack("<3Q4iQ", buf) == (a.data_ptr(), b.data_ptr(), c.data_ptr(), 5, 6, 7, 2, w.data_ptr())
    assert struct.unpack("<3Q4iQ", gemm_param_buffer(spec, Problem(5, 6, 7), a, b, c))[-1] == 0



@pytest.mark.gpu
def test_tracked_contender_records_the_sets_it_ran():
    from hgemm.timing import tracked  # imports the GPU runtime

    calls = []
    run, touched = tracked([lambda k=k: calls.append(k) for k in range(4)])
    for i in (2, 0, 2):
        run(i)
    assert calls == [2, 0, 2] and touched == {0, 2}


def test_staged_tensor_maps_describe_padded_copies_in_the_workspace(monkeypatch):
    """`staged=1`: the descriptor covers the kernel's padded copy in the workspace (1024-byte aligned
    offsets, rows padded to 64 fp16, logical dims so TMA zero-fills past them), not the operand."""
    import torch

    from hgemm import tensormap
    from hgemm.candidate import SpecError, parse_spec
    from hgemm.params import gemm_param_buffer, staged_operands
    from hgemm.problem import Problem

    calls = []
    monkeypatch.setattr(tensormap, "encode_tiled", lambda ptr, dims, strides, box, sw: calls.append(
        (ptr, dims, strides, box, sw)) or bytes(128))
    spec = parse_spec("/*@launch\nentry: k\nblock: 128\ngrid: 1\nworkspace: 8192\nlayouts: NN, TN\n"
                      "tensor_map: A, box=(128, 64), swizzle=128, staged=1\n"
                      "tensor_map: B, box=(64, 64), swizzle=128, staged=1\n@*/")
    a, b, c, w = (torch.empty(n, dtype=torch.float16) for n in (2 * 5 * 13, 2 * 13 * 11, 2 * 5 * 11, 4096))
    for layout, b_dims in (("NN", [11, 13, 2]), ("TN", [13, 11, 2])):
        calls.clear()
        problem = Problem(5, 11, 13, 2, layout)
        staged = staged_operands(spec, problem)
        # A: 10 rows of 64 fp16 (1280 bytes, so B starts at 2048); 128-byte row strides
        assert [(s.operand, s.offset, s.pitch) for s in staged] == [("A", 0, 64), ("B", 2048, 64)]
        gemm_param_buffer(spec, problem, a, b, c, w)
        assert calls == [(w.data_ptr(), [13, 5, 2], [128, 5 * 128], [64, 128, 1], 128),
                         (w.data_ptr() + 2048, b_dims, [128, b_dims[1] * 128], [64, 64, 1], 128)]
    # a workspace too small for the copies is the spec's fault, named before any launch
    with pytest.raises(SpecError, match="staged operands"):
        gemm_param_buffer(spec, Problem(64, 64, 63), a, b, c, w)
    with pytest.raises(SpecError, match="staged must be 0 or 1"):
        parse_spec("/*@launch\nentry: k\nblock: 1\ngrid: 1\ntensor_map: A, box=(8, 8), staged=2\n@*/")
    with pytest.raises(SpecError, match="only the inputs"):
        parse_spec("/*@launch\nentry: k\nblock: 1\ngrid: 1\ntensor_map: C, box=(8, 8), staged=1\n@*/")
    assert spec.tensor_maps[0].render() == "tensor_map: A, box=(128, 64), swizzle=128, staged=1"
    # the harness zeroes the workspace after the staged copies only: the kernel overwrites them whole
    from hgemm.params import workspace_to_zero

    w.fill_(1.0)
    workspace_to_zero(spec, Problem(5, 11, 13, 2), w).zero_()
    assert bool((w[:3072].float() == 1.0).all()) and not w[3072:].any()  # copies of 2048 + 4096 bytes
    plain = parse_spec("/*@launch\nentry: k\nblock: 1\ngrid: 1\nworkspace: 64\n@*/")
    assert workspace_to_zero(plain, Problem(5, 11, 13), w).numel() == w.numel()
    assert workspace_to_zero(plain, Problem(5, 11, 13), None) is None


class _Ptr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


def test_patching_the_output_params_equals_packing_anew():
    """The timing rotation packs each input set once and each output once, and patches them together."""
    from hgemm.candidate import parse_candidate
    from hgemm.params import gemm_params, output_params, pack_params, param_layout, patch_params
    from hgemm.problem import Problem

    spec = parse_candidate((ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()).spec
    p = Problem(100, 60, 30, 2)
    A, B = [_Ptr(0x1000 * k) for k in (1, 2)], [_Ptr(0x10000 * k) for k in (1, 2)]
    C, W = [_Ptr(0x100000 * k) for k in (1, 2, 3)], [_Ptr(0x1000000 * k) for k in (1, 2, 3)]
    layout = param_layout(gemm_params(spec, p, A[0], B[0], C[0], W[0]))
    for i in range(2):
        base = pack_params(gemm_params(spec, p, A[i], B[i], C[0], W[0]), layout)
        for o in range(3):
            want = pack_params(gemm_params(spec, p, A[i], B[i], C[o], W[o]), layout)
            got = patch_params(base, gemm_params(spec, p, A[0], B[0], C[o], W[o]), layout, output_params(spec))
            assert got == want

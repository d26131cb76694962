import struct

import pytest

from hgemm.params import Param, pack_params


def test_gemm_abi_layout():
    buf = pack_params([Param("P", 0x1000), Param("P", 0x2000), Param("P", 0x3000), Param("i", 5), Param("i", 6),
                       Param("i", 7), Param("i", 2), Param("P", 0)])
    assert len(buf) == 3 * 8 + 4 * 4 + 8
    assert struct.unpack_from("<3Q4iQ", buf) == (0x1000, 0x2000, 0x3000, 5, 6, 7, 2, 0)


def test_tensor_map_is_64_byte_aligned():
    tmap = bytes(range(128))
    buf = pack_params([Param("P", 1), Param("i", 3), Param("T", tmap), Param("T", tmap)])
    assert buf[64:192] == tmap and buf[192:320] == tmap
    assert len(buf) == 320


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

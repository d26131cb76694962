import pytest

from conftest import ROOT, read_kernel, with_spec
from hgemm.candidate import SpecError, extract_candidate_text, parse_candidate

NAIVE = read_kernel("kernels_corpus/reference/naive.cu")


def test_reference_kernels_parse():
    for name in ("naive", "smem_tiled", "mma_sync", "mma_pipelined"):
        cand = parse_candidate(read_kernel(f"kernels_corpus/reference/{name}.cu"))
        assert cand.spec.layouts == ("NN", "TN")
        assert len(cand.sha) == 16


def test_launch_dims_evaluate_expressions():
    cand = parse_candidate(NAIVE)
    grid, block, smem, ws = cand.spec.launch_dims({"M": 100, "N": 33, "K": 7, "batch": 3, "num_sms": 132})
    assert grid == (3, 7, 3) and block == (16, 16, 1) and smem == 0 and ws == 0


def test_spec_round_trips_through_render():
    cand = parse_candidate(NAIVE)
    again = parse_candidate(NAIVE.replace(NAIVE[NAIVE.index("/*@launch"):NAIVE.index("@*/") + 3], cand.spec.render()))
    assert again.spec == cand.spec


def test_who_zero_fills_the_workspace_is_the_launchers_unless_the_kernel_keeps_it():
    by_launch = parse_candidate(with_spec("entry: k\nblock: 32\ngrid: 1\nworkspace: M * 4")).spec
    kept = parse_candidate(with_spec("entry: k\nblock: 32\ngrid: 1\nworkspace: M * 4\nworkspace_zero: kept")).spec
    assert by_launch.zero_each_launch and by_launch.workspace_zero == "launch"
    assert not kept.zero_each_launch and kept.workspace_zero == "kept"
    assert "workspace_zero" not in by_launch.render() and "workspace_zero: kept" in kept.render()
    assert parse_candidate(with_spec(kept.render()[len("/*@launch\n"):-len("\n@*/")])).spec == kept


@pytest.mark.parametrize("spec,field", [
    ("block: 16\ngrid: 1", "entry"),
    ("entry: k\ngrid: 1", "block"),
    ("entry: k\nblock: 16", "grid"),
    ("entry: k\nblock: 2048\ngrid: 1", "block"),
    ("entry: k\nblock: 32\ngrid: cdiv(N, 16), P", "grid"),
    ("entry: k\nblock: 32\ngrid: __import__('os')", "grid"),
    ("entry: k\nblock: 32\ngrid: N / 2", "grid"),
    ("entry: k\nblock: 32\ngrid: 1\nsmem: 1.5", "smem"),
    ("entry: k\nblock: 32\ngrid: 1\nlayouts: NT", "layouts"),
    ("entry: k\nblock: 32\ngrid: 1\ncolour: red", "colour"),
    ("entry: k\nblock: 32\ngrid: 1\ntensor_map: D, box=(64, 64)", "tensor_map"),
    ("entry: k\nblock: 32\ngrid: 1\ntensor_map: A, box=(64, 512)", "tensor_map"),
    ("entry: k\nblock: 32\ngrid: 1\ntensor_map: A, box=(64, 64), swizzle=16", "tensor_map"),
    ("entry: 9k\nblock: 32\ngrid: 1", "entry"),
    ("entry: k\nblock: 32\ngrid: 1\nworkspace: 64\nworkspace_zero: never", "workspace_zero"),
])
def test_malformed_spec_names_the_field(spec, field):
    with pytest.raises(SpecError) as err:
        parse_candidate(with_spec(spec))
    assert err.value.field == field
    assert f"'{field}'" in str(err.value)


def test_missing_entry_function_is_rejected():
    with pytest.raises(SpecError) as err:
        parse_candidate(with_spec("entry: other\nblock: 32\ngrid: 1"))
    assert err.value.field == "entry"


def test_missing_or_unclosed_spec_block():
    with pytest.raises(SpecError):
        parse_candidate('extern "C" __global__ void k() {}')
    with pytest.raises(SpecError):
        parse_candidate('/*@launch\nentry: k\nextern "C" __global__ void k() {}')


def test_grid_out_of_range_at_launch_time():
    cand = parse_candidate(with_spec("entry: k\nblock: 32\ngrid: 1, cdiv(M, 1)"))
    with pytest.raises(SpecError) as err:
        cand.spec.launch_dims({"M": 70000, "N": 1, "K": 1, "batch": 1, "num_sms": 132})
    assert err.value.field == "grid"


def test_tensor_maps_and_num_sms():
    cand = parse_candidate(with_spec(
        "entry: k\nblock: 384\ngrid: min(num_sms, cdiv(M, 128) * cdiv(N, 256))\nsmem: 3 * (128 * 64 + 256 * 64) * 2\n"
        "tensor_map: A, box=(128, 64), swizzle=128\ntensor_map: B, box=(64, 256), swizzle=128"))
    assert [t.operand for t in cand.spec.tensor_maps] == ["A", "B"]
    grid, _, smem, _ = cand.spec.launch_dims({"M": 4096, "N": 4096, "K": 4096, "batch": 1, "num_sms": 132})
    assert grid == (132, 1, 1) and smem == 147456


def test_extract_from_model_completion():
    completion = "Here is a kernel:\n```cuda\n" + NAIVE + "```\nDone."
    assert extract_candidate_text(completion).strip() == NAIVE.strip()
    assert extract_candidate_text(NAIVE) == NAIVE


# ---------------------------------------------------------------- includes

INCLUDE_OK = [
    "#include <hgemm/common.cuh>",
    "#include <hgemm/mma_sync_gemm.cuh>",
    "#include <cuda_fp16.h>",
    "#  include <cuda_bf16.h>",
    "#include <cuda/barrier>",
    "#include <cooperative_groups/memcpy_async.h>",
    "#include <stdint.h>",
    "#include <cstdint>",
    '// #include "local.h" in a comment',
    '/* #include "x.h"\n#include "y.h" */',
    'const char* s = "#include \\"z.h\\"";',
]
INCLUDE_BAD = [
    ('#include "kernel.cuh"', "quoted include"),
    ("#include </etc/passwd>", "plain relative name"),
    ("#include <hgemm/../../secret.h>", "plain relative name"),
    ("#include <cuda/../../etc/x.h>", "plain relative name"),
    ("#include <hgemm/nonexistent.cuh>", "no project header 'hgemm/nonexistent.cuh'"),
    ("#include <thrust/sort.h>", "not a header a candidate may include"),
    ("#include <unistd.h>", "not a header a candidate may include"),
    ("#include KERNEL_HEADER", "not a <header> name"),
    ("#include_next <cuda_fp16.h>", "#include_next is not allowed"),
    ("#import <cuda.h>", "#import is not allowed"),
    ('#inc\\\nlude "split.h"', "quoted include"),
]


@pytest.mark.parametrize("line", INCLUDE_OK)
def test_allowed_includes_parse(line):
    text = f"{line}\n" + with_spec("entry: k\nblock: 32\ngrid: 1")
    assert parse_candidate(text).spec.entry == "k"


@pytest.mark.parametrize("line,why", INCLUDE_BAD)
def test_other_includes_are_spec_errors_naming_the_line(line, why):
    text = "#include <cuda_fp16.h>\n\n" + f"{line}\n" + with_spec("entry: k\nblock: 32\ngrid: 1")
    with pytest.raises(SpecError) as err:
        parse_candidate(text)
    msg = str(err.value)
    assert err.value.field == "include" and "line 3:" in msg and why in msg, msg
    assert "\n" not in msg


def test_raw_cuda_without_includes_still_parses():
    assert parse_candidate(with_spec("entry: k\nblock: 32\ngrid: 1")).spec.entry == "k"


def test_code_identity_ignores_comments_whitespace_and_the_entry_name_only():
    from hgemm.candidate import code_identity

    text = (ROOT / "benchmarks" / "tune" / "kernels" / "mma_sync_16x128x64_w1x4_s4_g8_sk1_mp.cu").read_text()
    renamed = "// measured on NVIDIA H200: 3.1 us\n" + text.replace("mma_sync_16x128x64_w1x4_s4_g8_sk1_mp", "model_k")
    assert code_identity(renamed.replace("\n", "\n  ")) == code_identity(text)
    assert "smem: 73728" in code_identity(text)  # the launch spec is code, not a comment
    assert code_identity(text.replace("smem: 73728", "smem: 65536")) != code_identity(text)
    assert code_identity(text.replace(", 3)", ", 2)", 1)) != code_identity(text)


def test_code_identity_keeps_code_a_comment_marker_does_not_hide():
    from hgemm.candidate import code_identity

    # inline PTX is a string: what follows // in it is code to compare (here after a \n escape)
    a = 'asm volatile("add.f32 %0, %1, %2; // sum\\n mul.f32 %0, %0, 2.0;" : "=f"(x) : "f"(y), "f"(z));'
    assert code_identity(a) != code_identity(a.replace("2.0", "4.0"))
    # a line splice ends a // comment's line later, as the preprocessor does: the spliced line is comment
    spliced = "int x = 1; // note \\\nint y = 2;\nint z = 3;"
    assert code_identity(spliced) == code_identity("int x = 1;\nint z = 3;")

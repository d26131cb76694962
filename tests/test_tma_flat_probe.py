"""CPU checks of benchmarks.tma_flat_probe: the tensor map arguments each case passes, the reference
model the GPU bytes are compared with, the per-case isolation, and that the CUDA source compiles."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT))
from benchmarks import tma_flat_probe as probe
from hgemm.compile import find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
ALIGNED_PTR = 1 << 20


# ------------------------------------------------------------------------------------ case list and maps

def test_cases_run_swizzle_none_first_and_have_unique_names():
    cases = probe.all_cases()
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    layout = probe.layout_cases()
    first_swizzled = next(i for i, c in enumerate(layout) if c.swizzle != "NONE")
    assert all(c.swizzle == "NONE" for c in layout[:first_swizzled])
    assert all(c.swizzle != "NONE" for c in layout[first_swizzled:])
    assert cases[0].swizzle == "NONE"


@pytest.mark.parametrize("case", probe.all_cases(), ids=lambda c: c.name)
def test_every_planned_map_meets_the_documented_encode_rules(case):
    args = probe.layout_map_args(case) if case.kind == "layout" else probe.rate_map_args(case)
    assert probe.tiled_map_problems(ALIGNED_PTR, **args) == []
    if args["swizzle"]:
        assert args["strides"][0] % 128 == 0  # the guide's 128-byte global alignment for swizzled maps


def test_validator_flags_what_the_driver_documents():
    ok = {"dims": [4096, 4096], "strides": [8192], "box": [64, 128], "swizzle": 128}
    assert probe.tiled_map_problems(ALIGNED_PTR, **ok) == []
    # the reason a 2-D map cannot describe K = 4095: its row pitch is not a multiple of 16
    assert any("multiple of 16" in p for p in probe.tiled_map_problems(ALIGNED_PTR, **{**ok, "dims": [4095, 4095],
                                                                                       "strides": [8190]}))
    assert any("swizzle span" in p for p in probe.tiled_map_problems(ALIGNED_PTR, **{**ok, "swizzle": 64}))
    assert any("boxDim[1]" in p for p in probe.tiled_map_problems(ALIGNED_PTR, **{**ok, "box": [64, 257]}))
    assert any("boxDim[0] * 2" in p for p in probe.tiled_map_problems(ALIGNED_PTR, **{**ok, "box": [4, 8],
                                                                                      "swizzle": 0}))
    assert any("16-byte" in p for p in probe.tiled_map_problems(ALIGNED_PTR + 8, **ok))
    assert any("128-byte" in p for p in probe.tiled_map_problems(ALIGNED_PTR + 16, **ok))
    assert any("shorter than a row" in p for p in probe.tiled_map_problems(ALIGNED_PTR, **{**ok, "strides": [4096]}))
    assert any("rank 0" in p for p in probe.tiled_map_problems(ALIGNED_PTR, [], [], [], 0))


def test_flat_map_is_one_row_with_a_128_byte_multiple_stride():
    args = probe.flat_map_args(61465, "128B")
    assert args == {"dims": [61465, 1], "strides": [122944 + 64], "box": [64, 1], "swizzle": 128}
    assert args["strides"][0] >= 61465 * 2 and args["strides"][0] % 128 == 0


def test_misaligned_box_counts():
    by_name = {c.name: c for c in probe.layout_cases()}
    assert probe.misaligned(probe.box_starts(by_name["layout_flat_s4096_o0_NONE"])) == 0
    assert probe.misaligned(probe.box_starts(by_name["layout_flat_s4096_o1_NONE"])) == 16
    # r * 4095 + 3 is a multiple of 8 for r = 3 and 11 only
    assert probe.misaligned(probe.box_starts(by_name["layout_flat_s4095_o3_NONE"])) == 14
    rate = {c.name: c for c in probe.rate_cases()}
    assert probe.rate_misaligned_boxes(rate["rate_flat_4096_NONE"])[0] == 0
    bad, total = probe.rate_misaligned_boxes(rate["rate_flat_4095_NONE"])
    assert total == 4095 * 64 and bad == (4095 - 512) * 64  # rows m with m * 4095 % 8 == 0 are m % 8 == 0


# ---------------------------------------------------------------------------------------- reference model

def test_random_data_is_fresh_nonzero_and_never_the_sentinel():
    a = probe.random_fp16_bits(100_000, np.random.default_rng(1))
    b = probe.random_fp16_bits(100_000, np.random.default_rng(2))
    assert a.min() >= 1 and a.max() <= probe.DATA_MAX and (a != probe.SENTINEL).all()
    assert np.isfinite(a.view(np.float16).astype(np.float32)).all()
    assert (a != b).mean() > 0.99


def _address_swizzled(rows: np.ndarray, pitch: int) -> np.ndarray:
    """An independent statement of the 128B pattern: byte address bits [7:9] XOR into bits [4:6],
    addresses counted from a 1024-aligned base, rows `pitch` bytes apart."""
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            addr = r * pitch + 2 * j
            swz = addr ^ (((addr >> 7) & 7) << 4)
            out[r, (swz - r * pitch) // 2] = rows[r, j]
    return out


@pytest.mark.parametrize("pitch", [128, 1024])
def test_swizzle_model_matches_the_address_rule(pitch):
    rows = np.arange(16 * 64, dtype=np.uint16).reshape(16, 64) + 1
    phases = [probe.swizzle_phase(r * pitch, "128B") for r in range(16)]
    assert np.array_equal(probe.apply_swizzle(rows, phases), _address_swizzled(rows, pitch))
    if pitch == 1024:  # one row per 1024-byte atom: nothing moves
        assert np.array_equal(probe.apply_swizzle(rows, phases), rows)
    assert np.array_equal(probe.apply_swizzle(rows, [probe.swizzle_phase(r * pitch, "NONE") for r in range(16)]),
                          rows)


def test_expected_rows_run_on_flat_and_zero_fill_past_the_end():
    case = next(c for c in probe.layout_cases() if c.name == "layout_flat_s4095_o3_NONE")
    data = probe.random_fp16_bits(probe.layout_data_len(case), np.random.default_rng(3))
    want = probe.expected_rows(data, case)
    for r in range(probe.ROWS - 1):
        assert np.array_equal(want[r], data[r * 4095 + 3: r * 4095 + 67])
    last = want[-1]
    assert np.array_equal(last[:40], data[-40:]) and (last[40:] == 0).all()


def test_expected_rows_of_a_2d_box_stop_at_the_row_end():
    case = probe.LayoutCase("t", "2d", 100, 50, "NONE")
    data = probe.random_fp16_bits(probe.layout_data_len(case), np.random.default_rng(4))
    want = probe.expected_rows(data, case)
    assert np.array_equal(want[2, :50], data[250:300]) and (want[2, 50:] == 0).all()


def test_compare_rows_reports_wrong_unwritten_and_zero_fill():
    case = next(c for c in probe.layout_cases() if c.name == "layout_flat_s4095_o3_128B_p128")
    data = probe.random_fp16_bits(probe.layout_data_len(case), np.random.default_rng(5))
    want = probe.expected_smem_rows(data, case)
    assert probe.compare_rows(want.copy(), want)["status"] == "ok"
    assert probe.compare_rows(want.copy(), want)["zero_fill_ok"] is True
    got = want.copy()
    got[3, :8] = probe.SENTINEL
    got[-1][want[-1] == 0] = 7  # the tail that should be zero-filled is not
    res = probe.compare_rows(got, want)
    assert res["status"] == "wrong_data" and res["wrong_rows"] == [3, 15]
    assert res["unwritten_elems"] == 8 and res["zero_fill_ok"] is False
    # the pre-swizzle rows are not what a 128B swizzled load leaves in shared memory
    assert probe.compare_rows(probe.expected_rows(data, case), want)["status"] == "wrong_data"


def _naive_tile_sums(data, M, K, mode, swizzle):
    """Per tile, element by element: the stage word each element lands in, times (position + 1)."""
    tiles_m, ktiles = -(-M // 128), -(-K // 64)
    sums = []
    for tm in range(tiles_m):
        for kt in range(ktiles):
            total = 0
            for r in range(min(128, M - tm * 128)):
                m = tm * 128 + r
                for j in range(64):
                    k = kt * 64 + j
                    if mode == "flat":
                        idx = m * K + k
                        v = int(data[idx]) if idx < len(data) else 0
                    else:
                        v = int(data[m * K + k]) if k < K else 0
                    addr = r * 128 + 2 * j
                    if swizzle == "128B":
                        addr ^= ((addr >> 7) & 7) << 4
                    total += (addr // 2 + 1) * v
            sums.append(total % 2**32)
    return np.array(sums, dtype=np.uint32)


@pytest.mark.parametrize("mode,M,K", [("flat", 130, 70), ("flat", 129, 64), ("2d", 130, 72)])
@pytest.mark.parametrize("swizzle", ["NONE", "128B"])
def test_tile_sums_match_an_element_by_element_model(mode, M, K, swizzle):
    data = probe.random_fp16_bits(M * K, np.random.default_rng(M + K))
    want = _naive_tile_sums(data, M, K, mode, swizzle)
    got = probe.expected_tile_sums(data, M, K, mode, swizzle)
    assert np.array_equal(got, want)
    other = "NONE" if swizzle == "128B" else "128B"
    assert not np.array_equal(probe.expected_tile_sums(data, M, K, mode, other), want)


def test_flat_and_2d_tile_sums_agree_when_no_tile_crosses_a_row_end():
    data = probe.random_fp16_bits(300 * 192, np.random.default_rng(6))
    assert np.array_equal(probe.expected_tile_sums(data, 300, 192, "flat", "128B"),
                          probe.expected_tile_sums(data, 300, 192, "2d", "128B"))
    # K = 200 leaves a last k-tile that runs on into the next row in flat mode, zeros in 2-D mode
    data = probe.random_fp16_bits(300 * 200, np.random.default_rng(7))
    assert not np.array_equal(probe.expected_tile_sums(data, 300, 200, "flat", "NONE"),
                              probe.expected_tile_sums(data, 300, 200, "2d", "NONE"))


# ----------------------------------------------------------------------------------- isolation and JSON

def test_classify_child_reads_the_result_line_or_names_the_failure():
    line = probe.RESULT_TAG + json.dumps({"status": "ok", "wrong_elems": 0})
    assert probe.classify_child(0, "noise\n" + line + "\n", "", False)["status"] == "ok"
    crash = probe.classify_child(1, "", "RuntimeError: CUDA error: an illegal instruction was encountered", False)
    assert crash["status"] == "crashed" and "illegal instruction" in crash["stderr"]
    assert probe.classify_child(None, "", "", True)["status"] == "hung"


def test_run_cases_rewrites_the_json_after_every_case_and_goes_on_after_a_crash(tmp_path):
    cases = probe.all_cases()[:3]
    out = tmp_path / "probe.json"
    seen_before_each = []

    def fake(case, seed):
        seen_before_each.append(len(json.loads(out.read_text())["cases"]))
        if case is cases[0]:
            return {"status": "crashed", "error": "an illegal instruction was encountered"}
        return {"status": "ok", "wrong_elems": 0, "zero_fill_ok": True}

    result = probe.run_cases(cases, fake, out, {"env": {}})
    assert seen_before_each == [0, 1, 2]
    written = json.loads(out.read_text())
    assert written == result
    assert [c["status"] for c in written["cases"]] == ["crashed", "ok", "ok"]
    assert written["planned"] == [c.name for c in cases]
    assert all(isinstance(c["seed"], int) and "misaligned_boxes" in c for c in written["cases"])


def test_a_child_with_an_unknown_case_reports_an_error_line():
    cmd = [sys.executable, "-m", "benchmarks.tma_flat_probe", "--child", "no_such_case", "--cubin", "x", "--seed", "1"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    res = probe.classify_child(proc.returncode, proc.stdout, proc.stderr, False)
    assert res["status"] == "error" and "no_such_case" in res["error"]


# ----------------------------------------------------------------------------------------------- compile

def _entry_params(ptx: str, entry: str) -> list[str]:
    """Parameter codes of a PTX entry, in the probe's Param code letters."""
    body = re.search(rf"\.entry {entry}\((.*?)\)", ptx, re.DOTALL).group(1)
    codes = []
    for decl in body.split(","):
        if ".b8" in decl and "[128]" in decl:
            codes.append("T")
        elif ".u64" in decl:
            codes.append("P")
        elif ".u32" in decl or ".s32" in decl:
            codes.append("i")
        else:
            codes.append("?" + decl.strip())
    return codes


@needs_nvcc
def test_source_compiles_for_sm_90a_and_parameters_match_what_the_probe_packs(tmp_path):
    cubin = probe.build(tmp_path)
    assert cubin.stat().st_size > 0
    src = tmp_path / "p.cu"
    src.write_text(probe.SOURCE)
    subprocess.run([find_nvcc(), "-ptx", "-gencode=arch=compute_90a,code=compute_90a", "-std=c++17",
                    "-o", str(tmp_path / "p.ptx"), str(src)], check=True, capture_output=True, text=True)
    ptx = (tmp_path / "p.ptx").read_text()
    layout_case, rate_case = probe.layout_cases()[0], probe.rate_cases()[0]
    assert _entry_params(ptx, "flat_layout") == [p.code for p in probe.layout_params(bytes(128), layout_case, 0, 0)]
    assert _entry_params(ptx, "stream_tiles") == [p.code for p in probe.rate_params(bytes(128), rate_case, 0, 0)]
    assert "cp.async.bulk.tensor.2d" in ptx and "fence.proxy.async.shared::cta" in ptx

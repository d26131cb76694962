"""Bad input ends `hgemm` and the stage CLIs with one line naming the file, field or value, a non-zero
exit and no traceback: missing and binary files, broken grids, empty selections, out-of-range options,
bad launch specs, tuning without a GPU. Each case is one a user hit."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from hgemm.candidate import SpecError, parse_spec
from hgemm.cli import main
from hgemm.problem import GridError, load_grid

SMOKE_GRID = str(ROOT / "configs/grids/smoke.yaml")
KERNELS = str(ROOT / "kernels_corpus/reference")


def user_error(argv: list[str]) -> str:
    """The one line `hgemm` exits with (status 1)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert isinstance(e.value.code, str) and "\n" not in e.value.code, e.value.code
    return e.value.code


def usage_error(argv: list[str], capsys) -> str:
    """argparse's `error:` line (status 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def bench(grid: str, *extra: str, out: str = "/nonexistent/out.json") -> list[str]:
    return ["bench", "--kernels", KERNELS, "--grid", grid, "--out", out, *extra]


# ---------------------------------------------------------------- hgemm check

def test_check_a_missing_path(tmp_path):
    path = tmp_path / "nosuch.cu"
    assert user_error(["check", str(path)]) == f"hgemm: {path}: no such file or folder"


def test_check_a_binary_file(tmp_path):
    path = tmp_path / "blob.cu"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" * 20)
    assert user_error(["check", str(path)]) == f"hgemm: {path}: not a UTF-8 text file"


def test_check_a_folder_without_kernels(tmp_path):
    assert user_error(["check", str(tmp_path)]) == f"hgemm: {tmp_path}: no .cu candidates in this folder"


def test_compile_errors_name_the_users_file(tmp_path, capsys, monkeypatch):
    import hgemm.cli
    from hgemm.compile import name_source

    log = ('kernel.cu(8): error: identifier "x" is undefined\n'
           '1 error detected in the compilation of "kernel.cu".\n#include "my_kernel.cu" kernel.cuh')
    assert name_source(log, "k/mine.cu") == (
        'k/mine.cu(8): error: identifier "x" is undefined\n'
        '1 error detected in the compilation of "k/mine.cu".\n#include "my_kernel.cu" kernel.cuh')
    path = tmp_path / "mine.cu"
    path.write_text("/* a kernel */")
    monkeypatch.setattr(hgemm.cli, "compile_all",
                        lambda named, **kw: [(None, {"status": "compile_error", "error": log})])
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: compile_error" in out and f"{path}(8): error" in out and "kernel.cu(" not in out


# ---------------------------------------------------------------- grids

def test_grid_file_errors_name_the_file(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert user_error(bench(str(empty))) == (
        f"hgemm: {empty}: a grid is a mapping with a non-empty 'groups' list (the file is empty)")
    broken = tmp_path / "broken.yaml"
    broken.write_text("groups:\n  - {class: a, cube: [1, 2\n")
    msg = user_error(bench(str(broken)))
    assert msg.startswith(f"hgemm: {broken}: YAML syntax error at line 3, column 1: ")
    assert user_error(bench(str(tmp_path / "none.yaml"))) == f"hgemm: {tmp_path / 'none.yaml'}: no such grid file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups:\n  - {class: tiny, M: 0, N: 1, K: 1}\n")
    assert user_error(bench(str(bad))) == (f"hgemm: {bad}: grid group 'tiny': problem field M must be a positive "
                                           "integer, got 0")


@pytest.mark.timeout(5)
@pytest.mark.parametrize("cube, what", [
    ({"start": 1, "stop": 100, "factor": 1}, "field cube: range factor must be an integer >= 2, got 1"),  # looped
    ({"start": 1, "stop": 100, "factor": 0}, "field cube: range factor must be an integer >= 2, got 0"),
    ({"start": 0, "stop": 100}, "field cube: range start must be an integer >= 1, got 0"),
    ({"start": 64, "stop": 1}, "field cube: range start 64 > stop 1 selects nothing"),
    ([], "field cube is an empty list"),
])
def test_grid_ranges_that_select_nothing_or_never_end(cube, what):
    with pytest.raises(GridError) as e:
        load_grid({"groups": [{"class": "c", "cube": cube}]})
    assert str(e.value) == f"inline grid: grid group 'c': {what}"


def test_unknown_group_field_is_named():
    with pytest.raises(GridError, match=r"unknown field\(s\) \['cubes'\]"):
        load_grid({"groups": [{"class": "c", "cubes": [64]}]})


def test_a_class_the_grid_lacks_is_an_error():
    assert user_error(bench(SMOKE_GRID, "--classes", "aligned", "nosuch")) == (
        f"hgemm: {SMOKE_GRID}: no shape class 'nosuch' (classes: aligned, batched_small, edge)")


# ---------------------------------------------------------------- options

@pytest.mark.parametrize("extra, line", [
    (["--limit", "-1"], "argument --limit: -1 is below 0"),
    (["--reps", "-5"], "argument --reps: -5 is below 1"),
    (["--reps", "five"], "argument --reps: 'five' is not an integer"),
    (["--baselines", "cublas,foo"], "argument --baselines: unknown baseline(s) foo (known: cublas, torch, cublaslt"),
])
def test_out_of_range_options(extra, line, capsys):
    assert line in usage_error(bench(SMOKE_GRID, *extra), capsys)


def test_bench_needs_kernels_or_a_library(tmp_path, capsys):
    argv = ["bench", "--grid", SMOKE_GRID, "--out", str(tmp_path / "o.json")]
    assert usage_error(argv, capsys) == "hgemm bench: error: give exactly one of --kernels or --library"
    assert user_error(argv + ["--library", str(tmp_path)]) == (
        f"hgemm: {tmp_path}: not a tuned library (no table.json; `hgemm tune --out {tmp_path}` writes one)")


def test_summarize_a_file_that_is_not_results(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{not json")
    assert user_error(["summarize", str(path)]).startswith(f"hgemm: {path}: not a results JSON file (line 1: ")
    path.write_text(json.dumps([1, 2]))
    assert "no 'problems' list" in user_error(["summarize", str(path)])


def test_version(capsys):
    from hgemm import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"hgemm {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*|unknown", __version__)


def test_tune_without_a_gpu_says_so_at_once(tmp_path, monkeypatch):
    import hgemm.cli

    monkeypatch.setattr(hgemm.cli, "visible_gpus", lambda: [])
    monkeypatch.setattr(hgemm.cli, "tune", lambda *a, **k: pytest.fail("tune ran on a machine without a GPU"))
    msg = user_error(["tune", "--grid", SMOKE_GRID, "--out", str(tmp_path / "lib")])
    assert msg.startswith("hgemm: tune needs a GPU") and "hgemm check" in msg
    assert not (tmp_path / "lib").exists()


def test_no_traceback_reaches_the_terminal(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hgemm.cli", "check", str(tmp_path / "nosuch.cu")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"hgemm: {tmp_path / 'nosuch.cu'}: no such file or folder\n"


# ---------------------------------------------------------------- launch specs

@pytest.mark.parametrize("spec, field, what", [
    ("entry: k\nblock: 32\ngrid: 1\nsmem: -5", "smem", "-5 bytes is negative"),
    ("entry: k\nblock: 32\ngrid: 1\nworkspace: 2 - 3", "workspace", "-1 bytes is negative"),
    ("entry: k\nblock: 32\ngrid: 0, 1, 1", "grid", "dimension 0 = 0 is outside 1..2147483647"),
    ("entry: k\nblock: 32\ngrid: 1, 65536", "grid", "dimension 1 = 65536 is outside 1..65535"),
    ("entry: k\nblock: sixteen\ngrid: 1", "block", "takes integer literals only, got the name 'sixteen'"),
])
def test_constant_spec_values_are_checked_at_parse_time(spec, field, what):
    with pytest.raises(SpecError) as e:
        parse_spec(f"/*@launch\n{spec}\n@*/")
    assert e.value.field == field and str(e.value) == f"launch spec field '{field}': {what}"


def test_spec_expressions_of_variables_are_still_checked_per_problem():
    spec = parse_spec("/*@launch\nentry: k\nblock: 32\ngrid: cdiv(M, 64) - 1\nsmem: 1024 - K\n@*/")
    with pytest.raises(SpecError, match="dimension 0 = 0"):
        spec.launch_dims({"M": 64, "N": 1, "K": 1, "batch": 1, "num_sms": 132})
    with pytest.raises(SpecError, match="negative"):
        spec.launch_dims({"M": 640, "N": 1, "K": 2048, "batch": 1, "num_sms": 132})


# ---------------------------------------------------------------- stage CLIs

def _stage_config(tmp_path, text: str) -> str:
    path = tmp_path / "stage.yaml"
    path.write_text(text)
    return str(path)


def test_stage_settings_out_of_range_or_unknown(tmp_path):
    from stages import bench as bench_stage
    from stages import tune as tune_stage

    config = _stage_config(tmp_path, "tune:\n  reps: -3\n")
    with pytest.raises(SystemExit) as e:
        tune_stage.main(["--config", config, "--out", str(tmp_path / "lib")])
    assert e.value.code == f"python -m stages.tune: {config}: tune.reps: -3 is less than the minimum of 1"
    config = _stage_config(tmp_path, "bench:\n  repz: 3\n")
    with pytest.raises(SystemExit) as e:
        bench_stage.main(["--config", config, "--samples", str(tmp_path), "--library", str(tmp_path),
                          "--out", str(tmp_path / "bench")])
    assert e.value.code == (f"python -m stages.bench: {config}: bench: unknown key 'repz' "
                            "(did you mean 'reps'?)")
    with pytest.raises(SystemExit) as e:
        tune_stage.main(["--config", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "lib")])
    assert e.value.code == f"python -m stages.tune: {tmp_path / 'none.yaml'}: no such config file"
    with pytest.raises(SystemExit) as e:
        tune_stage.main(["--config", str(ROOT / "configs/smoke.yaml"), "--set", "tiles_per_family=0",
                         "--out", str(tmp_path / "lib")])
    assert e.value.code.endswith("smoke.yaml with --set: tune.tiles_per_family: 0 is less than the minimum of 1")


def test_bench_stage_with_a_bad_grid_keeps_the_last_results(tmp_path):
    from stages import bench as bench_stage

    out = tmp_path / "bench"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    config = _stage_config(tmp_path, f"bench:\n  grid: {SMOKE_GRID}\n  classes: [nosuch]\n")
    with pytest.raises(SystemExit) as e:
        bench_stage.main(["--config", str(ROOT / "configs/default.yaml"), "--config", config, "--samples",
                          str(tmp_path), "--library", str(tmp_path), "--out", str(out)])
    assert e.value.code.startswith(f"python -m stages.bench: {SMOKE_GRID}: no shape class 'nosuch'")
    assert (out / "metrics.json").read_text() == "{}"  # nothing lost


def test_sample_stage_checks_its_grid_before_loading_a_model(tmp_path):
    from stages import sample as sample_stage

    config = _stage_config(tmp_path, "sample:\n  grid: configs/grids/nosuch.yaml\n  k: 1\n")
    with pytest.raises(SystemExit) as e:
        sample_stage.main(["--config", str(ROOT / "configs/default.yaml"), "--config", config,
                           "--model", str(tmp_path / "no_model"), "--out", str(tmp_path / "s")])
    assert e.value.code == "python -m stages.sample: configs/grids/nosuch.yaml: no such grid file"


# (a lone backslash-newline in a docstring would join the example's lines with the indentation's spaces)
@pytest.mark.parametrize("stage", ["corpus", "tokenizer", "pretrain", "tune", "rl_general", "rl_hgemm", "sample",
                                   "bench", "library", "report"])
def test_stage_help_names_the_module_and_has_clean_examples(stage, capsys):
    import importlib

    try:
        module = importlib.import_module(f"stages.{stage}")
    except ImportError as e:  # the training stages need the train extra
        pytest.skip(f"stages.{stage} needs {e.name}")
    parser = getattr(module, "build_parser", None)
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"]) if parser else module.main(["--help"])
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m stages.{stage} ")
    examples = [line for line in text.splitlines() if line.lstrip().startswith("python -m ")]
    assert examples and not any(re.search(r"\S {2,}\S", line.strip()) for line in examples), examples


def test_merge_and_side_by_side_bench_name_the_folder_at_fault(tmp_path):
    assert user_error(["merge", str(tmp_path / "none"), "--out", str(tmp_path / "m")]) == (
        f"hgemm: {tmp_path / 'none'}: not a tuned library (no table.json)")
    for folder in (tmp_path / "x" / "lib", tmp_path / "y" / "lib"):
        folder.mkdir(parents=True)
        (folder / "table.json").write_text(json.dumps({"fallback": "f", "entries": {}}))
    argv = ["bench", "--grid", SMOKE_GRID, "--out", str(tmp_path / "o.json"),
            "--library", str(tmp_path / "x" / "lib"), "--library", str(tmp_path / "y" / "lib")]
    assert "need distinct folder names" in user_error(argv)


def test_summarize_a_file_that_is_not_gzip(tmp_path):
    path = tmp_path / "r.json.gz"
    path.write_text("plain")
    assert user_error(["summarize", str(path)]) == f"hgemm: {path}: not a gzip file"

"""The Snakemake DAG: dry runs of the default and smoke configs, schema validation, override configs
that name only what they change, wiring conventions of the rules, reruns limited to the edited stage
and what follows, deleted outputs and missing grid files noticed, and (slow) the whole smoke DAG end to
end on CPU with the report's contents checked. tests/test_reruns.py runs the rerun sequences for real."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
STAGES = ["corpus", "tokenizer", "pretrain", "tune", "rl_general", "rl_hgemm", "sample", "bench", "library", "report"]
GPU_STAGES = {"pretrain", "tune", "rl_general", "rl_hgemm", "sample", "bench"}
# every job of a full run: each stage, and the sample stage once more on the pretrained model
JOBS = set(STAGES) | {"sample_pretrained"}
pytest.importorskip("snakemake")


def workflow_copy(tmp_path: Path) -> Path:
    """The workflow in a temporary folder: code and committed results (the tuned table the corpus frames)
    linked, configs copied (tests edit them), so results/, work/ and .snakemake/ never touch the checkout."""
    wf = tmp_path / "wf"
    wf.mkdir()
    for name in ("Snakefile", "rules", "profiles", "hgemm", "stages", "training", "kernels_corpus", "benchmarks"):
        (wf / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "configs", wf / "configs")
    return wf


def snakemake(wf: Path, *args: str, timeout: float = 300, full: bool = True) -> subprocess.CompletedProcess:
    # HGEMM_FULL=1: plan the configs as written, even on this GPU-less machine (see the next test)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HGEMM_FULL="1" if full else "0")
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=wf, env=env,
                          capture_output=True, text=True, timeout=timeout)


def planned_jobs(wf: Path, *args: str) -> set[str]:
    """Rules a dry run would execute (from its job-stats table)."""
    r = snakemake(wf, "-n", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    text = r.stdout + r.stderr
    if "Nothing to be done" in text:
        return set()
    table = text.split("Job stats:", 1)[1].split("\n\n", 1)[0]  # up to the table's closing blank line
    return {line.split()[0] for line in table.splitlines()[3:] if line.strip() and line.split()[0] != "total"}


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine runs the full configuration")
def test_cpu_machine_runs_the_smoke_sizes_by_default(tmp_path):
    wf = workflow_copy(tmp_path)
    r = snakemake(wf, "-n", full=False)
    assert r.returncode == 0, r.stdout + r.stderr
    smoke_results = yaml.safe_load((wf / "configs/smoke.yaml").read_text())["results"]
    assert (wf / smoke_results / ".config" / "pretrain.yaml").exists()
    assert not (wf / "results" / ".config").exists()


@pytest.mark.parametrize("configfile", [None, "configs/smoke.yaml", "configs/gpu-quick.yaml", "configs/gpu-rl.yaml"])
def test_dry_run_plans_every_stage(tmp_path, configfile):
    wf = workflow_copy(tmp_path)
    jobs = planned_jobs(wf, *(["--configfile", configfile] if configfile else []))
    assert jobs == JOBS | {"all"}
    results = yaml.safe_load((wf / "configs" / (Path(configfile).name if configfile else "default.yaml")).read_text())
    results = results.get("results", "results")
    # each stage got its own section file, the input its rule reruns on
    assert sorted(p.stem for p in (wf / results / ".config").glob("*.yaml")) == sorted(STAGES)


def test_stage_target_runs_only_up_to_that_stage(tmp_path):
    wf = workflow_copy(tmp_path)
    assert planned_jobs(wf, "rl_hgemm") == {"corpus", "tokenizer", "pretrain", "tune", "rl_general", "rl_hgemm"}
    assert planned_jobs(wf, "--until", "tokenizer") == {"corpus", "tokenizer"}


def test_the_ablation_trains_rl_hgemm_from_the_pretrained_model(tmp_path):
    wf = workflow_copy(tmp_path)
    (wf / "ablation.yaml").write_text("rl_hgemm:\n  start_from: pretrain\n")
    assert planned_jobs(wf, "rl_hgemm", "--configfile", "ablation.yaml") == {
        "corpus", "tokenizer", "pretrain", "tune", "rl_hgemm"}
    (wf / "ablation.yaml").write_text("rl_hgemm:\n  start_from: tune\n")
    r = subprocess.run(["snakemake", "-n", "rl_hgemm", "--configfile", "ablation.yaml"], cwd=wf,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "start_from" in r.stdout + r.stderr


def test_schema_accepts_configs_and_rejects_bad_ones(tmp_path):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    schema = str(ROOT / "configs" / "schema.yaml")
    default = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    validate(default, schema)
    bad_cases = [
        {"sample": {**default["sample"], "k": 0}},
        {"bench": {**default["bench"], "timing_method": "wallclock"}},
        {"pretrain": {**default["pretrain"], "train": {**default["pretrain"]["train"], "max_steps": "many"}}},
        {"report": {**default["report"], "peak_tflops": -1}},
        {"samples": {}},  # a misspelt section
    ]
    for change in bad_cases:
        with pytest.raises(WorkflowError):
            validate({**default, **change}, schema)
    # and through the CLI: a bad override file stops the dry run with the schema's message
    wf = workflow_copy(tmp_path)
    (wf / "bad.yaml").write_text("sample:\n  k: 0\n")
    r = snakemake(wf, "-n", "--configfile", "bad.yaml")
    assert r.returncode != 0 and "0 is less than the minimum of 1" in r.stdout + r.stderr


OVERRIDES = ["smoke.yaml", "gpu-quick.yaml", "gpu-rl.yaml"]


@pytest.mark.parametrize("name", OVERRIDES)
def test_override_configs_name_only_what_they_change(name):
    """An override file is laid over configs/default.yaml (nested keys merge), so each of its settings
    must be one default.yaml has, with another value: a repeated value would be a second place for it."""
    default = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())

    def walk(over: dict, base: dict, where: str):
        for key, value in over.items():
            assert key in base, f"configs/{name}: {where}{key} is not a setting of configs/default.yaml"
            if isinstance(value, dict) and isinstance(base[key], dict):
                assert value, f"configs/{name}: {where}{key} is empty"
                walk(value, base[key], f"{where}{key}.")
            else:
                assert value != base[key], f"configs/{name}: {where}{key}: {value!r} is default.yaml's value too"

    walk(yaml.safe_load((ROOT / "configs" / name).read_text()), default, "")
    assert not (ROOT / "configs" / "sections").exists()  # a stage reads default.yaml (and overrides) itself


def test_rules_only_wire_with_log_benchmark_and_gpu_resources():
    for stage in STAGES:
        text = (ROOT / "rules" / f"{stage}.smk").read_text()
        # pretrain's launcher is python or torchrun (pretrain.launch.processes)
        launch = "{params.launcher} -m stages.pretrain " if stage == "pretrain" else f"python -m stages.{stage} "
        assert launch in text and "> {log} 2>&1" in text, stage
        assert "log:" in text and "benchmark:" in text
        assert ("gpu=1" in text) == (stage in GPU_STAGES), stage
        assert "run:" not in text and "script:" not in text  # rules only wire; stages do the work
        # a training stage publishes its outputs whole; Snakemake keeps the old ones until then
        assert ("update(" in text) == (stage in {"pretrain", "rl_general", "rl_hgemm"}), stage
    local = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert local["resources"] == {"gpu": 1}
    slurm = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert slurm["executor"] == "slurm"


def test_pretrain_launches_one_process_torchrun_or_one_per_gpu(tmp_path):
    wf = workflow_copy(tmp_path)
    for processes, launcher in ((1, "python -m stages.pretrain"),
                                (2, "torchrun --standalone --nproc-per-node=2 -m stages.pretrain"),
                                ("gpus", "nvidia-smi -L")):
        (wf / "launch.yaml").write_text(f"pretrain:\n  launch:\n    processes: {processes}\n")
        r = snakemake(wf, "-n", "-p", "pretrain", "--configfile", "launch.yaml")
        assert r.returncode == 0 and launcher in r.stdout, (processes, r.stdout[-2000:] + r.stderr[-2000:])


def _fake_outputs(wf: Path) -> None:
    """Every declared output, as an empty file of one mtime newer than the section files: a finished
    DAG without running it (Snakemake then judges reruns by mtimes and section files only)."""
    r = snakemake(wf, "--summary")
    assert r.returncode == 0, r.stderr
    outputs = [line.split("\t")[0] for line in r.stdout.splitlines()[1:] if "\t" in line]
    assert any(o.endswith("report/report.html") for o in outputs)
    stamp = time.time() + 5
    for o in outputs:
        path = wf / o
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (stamp, stamp))


def _edit(wf: Path, stage: str, **values) -> None:
    path = wf / "configs" / "default.yaml"
    data = yaml.safe_load(path.read_text())
    data[stage].update(values)
    path.write_text(yaml.safe_dump(data))


def test_editing_one_section_reruns_that_stage_and_what_follows(tmp_path):
    wf = workflow_copy(tmp_path)
    _fake_outputs(wf)
    assert planned_jobs(wf) == set()
    before = {p.name: p.stat().st_mtime for p in (wf / "results" / ".config").glob("*.yaml")}
    time.sleep(6)  # past the fake outputs' mtime
    _edit(wf, "rl_hgemm", grpo={"max_steps": 7})
    assert planned_jobs(wf) == {"rl_hgemm", "sample", "sample_pretrained", "bench", "library", "report", "all"}
    after = {p.name: p.stat().st_mtime for p in (wf / "results" / ".config").glob("*.yaml")}
    # only the edited stage's section file was rewritten
    assert [n for n in before if before[n] != after[n]] == ["rl_hgemm.yaml"]
    r = snakemake(wf, "--list-changes", "input")
    assert r.returncode == 0
    _edit(wf, "corpus", family_variants=10)
    assert planned_jobs(wf) == JOBS - {"tune"} | {"all"}


def test_forcing_a_stage_and_what_follows(tmp_path):
    wf = workflow_copy(tmp_path)
    _fake_outputs(wf)
    assert planned_jobs(wf, "-f", "bench") == {"bench"}
    assert planned_jobs(wf, "-R", "sample") == {"sample", "bench", "library", "report", "all"}


def test_a_deleted_output_reruns_its_stage_and_what_follows(tmp_path):
    wf = workflow_copy(tmp_path)
    _fake_outputs(wf)
    (wf / "results" / "rl_hgemm" / "curves.json").unlink()
    assert planned_jobs(wf) == {"rl_hgemm", "sample", "sample_pretrained", "bench", "library", "report", "all"}


@pytest.mark.parametrize("setting", ["sample.grid", "bench.grid", "tune.grid", "rl_hgemm.shapes.grid"])
def test_a_missing_grid_file_stops_the_run_with_its_name(tmp_path, setting):
    wf = workflow_copy(tmp_path)
    path = wf / "configs" / "default.yaml"
    data = yaml.safe_load(path.read_text())
    *parents, leaf = setting.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[leaf] = "configs/grids/nosuch.yaml"
    path.write_text(yaml.safe_dump(data))
    r = snakemake(wf, "-n")
    assert r.returncode != 0 and f"{setting}: configs/grids/nosuch.yaml does not exist" in r.stdout + r.stderr


def _missing_stage_modules() -> list[str]:
    return [f"stages.{s}" for s in STAGES if importlib.util.find_spec(f"stages.{s}") is None]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # past the snakemake call's own 1200 s; pyproject's 600 s is per test
@pytest.mark.skipif(bool(_missing_stage_modules()), reason=f"stage module(s) missing: {_missing_stage_modules()}")
def test_smoke_dag_end_to_end_on_cpu(tmp_path):
    wf = workflow_copy(tmp_path)
    r = snakemake(wf, "--configfile", "configs/smoke.yaml", timeout=1200)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    results = wf / "results" / "smoke"
    for stage in sorted(JOBS):
        assert (results / stage / "metrics.json").is_file(), stage
        assert (results / "logs" / f"{stage}.log").is_file() and (results / "benchmarks" / f"{stage}.tsv").is_file()
    md = (results / "report" / "report.md").read_text()
    html = (results / "report" / "report.html").read_text()
    assert md.startswith("# HGEMM-L2 smoke report (CPU)\n\n> **Nothing was timed")
    assert html.index("Nothing was timed") < html.index("<h2>")
    for section in ("## Kernels against the baselines", "### Per shape", "## Reinforcement learning curves",
                    "## Corpus", "## Stage metrics", "## Environment"):
        assert section in md, section
    # the per-shape table of a CPU run, with the held-out column (smoke.yaml holds 1024^3 out of rl_hgemm)
    assert "| shape | class | held out | library status" in md
    assert "b1_m1_n1_k1_NN" in md and "b16_m64_n64_k64_NN" in md
    assert "data:image/png;base64," in html  # RL curves are drawn even on CPU
    assert planned_jobs(wf, "--configfile", "configs/smoke.yaml") == set()  # a second run has nothing to do
    r = snakemake(wf, "--configfile", "configs/smoke.yaml", "--report", "report.zip")
    assert r.returncode == 0 and (wf / "report.zip").stat().st_size > 0, r.stderr[-3000:]

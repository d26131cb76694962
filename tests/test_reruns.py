"""Reruns and resume: the resume key and the work-dir states of stages.common (fast, no Snakemake), then
(slow) the smoke DAG run for real through the sequences a user goes through: a config edit, a deleted
work dir, a retrained input model, a forced rerun, a failed run with a bad value then a corrected one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stages.common import (
    STAMP,
    fingerprint,
    last_checkpoint,
    prepare_work_dir,
    publish,
    read_stamp,
    resume_key,
    staging_dir,
)

ROOT = Path(__file__).parents[1]


# ---- the resume key -------------------------------------------------------------------------------

def _model_dir(path: Path, weights: bytes = b"weights") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text('{"hidden_size": 8}')
    (path / "model.safetensors").write_bytes(weights)
    (path / "tokenizer.json").write_text("{}")
    return path


def test_fingerprint_follows_weights_and_config_not_logs(tmp_path):
    model = _model_dir(tmp_path / "m")
    first = fingerprint(model)
    (model / "metrics.json").write_text('{"wall_time_s": 12.5}')  # differs between runs of one input
    (model / "samples.jsonl").write_text("x\n")
    assert fingerprint(model) == first
    (model / "model.safetensors").write_bytes(b"retrained")
    assert fingerprint(model) != first
    assert fingerprint(_model_dir(tmp_path / "copy")) == first  # content, not place
    assert fingerprint(tmp_path / "missing") is None and fingerprint(None) is None
    grid = tmp_path / "grid.yaml"
    grid.write_text("groups: []\n")
    assert fingerprint(grid) and fingerprint(grid) != first


def test_resume_key_holds_settings_and_input_hashes(tmp_path):
    model = _model_dir(tmp_path / "m")
    key = resume_key({"grpo": {"max_steps": 6}}, {"model": str(model), "library": None})
    assert key == {"settings": {"grpo": {"max_steps": 6}}, "inputs": {"model": fingerprint(model), "library": None}}


# ---- the work dir ---------------------------------------------------------------------------------

def _key(tmp_path, steps=6, weights=b"weights"):
    return resume_key({"grpo": {"max_steps": steps}}, {"model": str(_model_dir(tmp_path / "m", weights))})


def _checkpoint(work: Path, step: int) -> None:
    (work / f"checkpoint-{step}").mkdir(parents=True)


def test_first_run_starts_fresh_and_records_the_key(tmp_path, capsys):
    work = tmp_path / "work"
    key = _key(tmp_path)
    assert prepare_work_dir(work, key) is False
    stamp = read_stamp(work)
    assert stamp["key"] == key and stamp["finished"] is False
    assert "training from the start" in capsys.readouterr().out


def test_unfinished_run_of_the_same_key_resumes_and_says_so(tmp_path, capsys):
    work = tmp_path / "work"
    key = _key(tmp_path)
    prepare_work_dir(work, key)
    _checkpoint(work, 3)
    _checkpoint(work, 12)
    assert last_checkpoint(work).name == "checkpoint-12"  # by number, not by name
    capsys.readouterr()
    assert prepare_work_dir(work, key) is True
    assert "resuming from checkpoint-12, same config and inputs" in capsys.readouterr().out
    assert (work / "checkpoint-3").is_dir()


def test_other_settings_or_inputs_start_fresh_and_move_the_old_state_aside(tmp_path, capsys):
    work = tmp_path / "work"
    prepare_work_dir(work, _key(tmp_path))
    _checkpoint(work, 6)
    capsys.readouterr()
    assert prepare_work_dir(work, _key(tmp_path, steps=5)) is False
    out = capsys.readouterr().out
    assert "settings.grpo changed" in out and "moved aside to" in out and out.count("\n") == 1
    assert last_checkpoint(work) is None and (tmp_path / "work.previous" / "checkpoint-6").is_dir()
    # a retrained input model is another key too, with the same settings
    _checkpoint(work, 5)
    assert prepare_work_dir(work, _key(tmp_path, steps=5, weights=b"retrained")) is False
    assert "inputs.model changed" in capsys.readouterr().out


def test_a_finished_run_is_never_resumed(tmp_path, capsys):
    # a run that published its outputs is done: running the stage again (snakemake -f, -R, or a
    # config edit that leaves the resume key alone) trains again instead of reloading its checkpoint
    work, out = tmp_path / "work", tmp_path / "out"
    key = _key(tmp_path)
    prepare_work_dir(work, key)
    _checkpoint(work, 6)
    staged = staging_dir(out)
    (staged / "metrics.json").write_text("{}")
    publish(staged, out, work)
    assert read_stamp(work)["finished"] is True
    capsys.readouterr()
    assert prepare_work_dir(work, key) is False
    assert "a finished run" in capsys.readouterr().out
    assert last_checkpoint(work) is None and read_stamp(work)["finished"] is False


def test_state_without_a_stamp_is_moved_aside(tmp_path):
    work = tmp_path / "work"
    _checkpoint(work, 4)
    (work / "config_hash.txt").write_text("c6a71501e250c9c1\n")
    assert prepare_work_dir(work, _key(tmp_path)) is False
    assert (tmp_path / "work.previous" / "checkpoint-4").is_dir() and (work / STAMP).is_file()


def test_a_failed_early_run_neither_blocks_the_corrected_one_nor_costs_the_earlier_checkpoints(tmp_path, capsys):
    work = tmp_path / "work"
    good = _key(tmp_path)
    prepare_work_dir(work, good)
    _checkpoint(work, 3)  # interrupted part way
    # a mistyped value: the run records its key and fails before its first checkpoint
    assert prepare_work_dir(work, _key(tmp_path, steps="abc")) is False
    assert read_stamp(work)["key"]["settings"]["grpo"]["max_steps"] == "abc"
    capsys.readouterr()
    # the corrected run gets the interrupted run's checkpoints back
    assert prepare_work_dir(work, good) is True
    assert "resuming from checkpoint-3 set aside in" in capsys.readouterr().out
    assert not (tmp_path / "work.previous").exists()
    # and a corrected run of yet another value starts fresh, without a refusal
    prepare_work_dir(work, _key(tmp_path, steps="abc"))
    assert prepare_work_dir(work, _key(tmp_path, steps=2)) is False


def test_publish_swaps_whole_folders_and_a_failed_run_leaves_the_old_outputs(tmp_path):
    out = tmp_path / "results" / "rl_hgemm"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text('{"run": 1}')
    (out / "model.safetensors").write_bytes(b"old")
    staged = staging_dir(out)
    (staged / "model.safetensors").write_bytes(b"new, half written")
    # the run fails here: the published folder is untouched, and the next run starts a clean staging dir
    assert json.loads((out / "metrics.json").read_text()) == {"run": 1}
    staged = staging_dir(out)
    assert not any(staged.iterdir())
    (staged / "metrics.json").write_text('{"run": 2}')
    publish(staged, out)
    assert json.loads((out / "metrics.json").read_text()) == {"run": 2}
    assert not (out / "model.safetensors").exists()  # nothing of the old run mixed in
    assert sorted(p.name for p in out.parent.iterdir()) == ["rl_hgemm"]


def test_other_ranks_wait_for_rank_0(tmp_path, monkeypatch):
    work = tmp_path / "work"
    key = _key(tmp_path)
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(TimeoutError):
        prepare_work_dir(work, key, wait_s=0.5)  # rank 0 has not stamped it yet
    assert not work.exists()  # and rank 1 touched nothing
    monkeypatch.setenv("RANK", "0")
    prepare_work_dir(work, key)
    monkeypatch.setenv("RANK", "1")
    assert prepare_work_dir(work, key, wait_s=0.5) is True


# ---- the smoke DAG, run for real (slow) -------------------------------------------------------------
#
# One pipeline in a temporary folder is reused across the sequences, run only as far as each needs.
# The smoke sizes are cut further by an override file laid over configs/smoke.yaml.

QUICK = {
    "corpus": {"max_docs_per_package": 40, "family_variants": 4, "reference_framings": 1, "context_framings": 1},
    "tokenizer": {"vocab_size": 1024, "max_train_docs": 100},
    "pretrain": {"train": {"max_steps": 4, "save_steps": 2, "eval_steps": 4, "logging_steps": 1,
                           "max_eval_blocks": 4},
                 "sample": {"num_samples": 1, "max_new_tokens": 8, "batch_size": 1, "problems": [[256, 256, 256]],
                            "compile": False}},
    "rl_general": {"tasks": {"names": ["vector_add_f32"], "repeats": 2},  # two prompts: one step
                   "grpo": {"max_steps": 1, "max_completion_length": 16, "save_steps": 1},
                   "probe": {"prompts": 0}},
    "rl_hgemm": {"grpo": {"max_steps": 1, "max_completion_length": 16, "save_steps": 1},
                 "shapes": {"shapes_per_reward": 1, "repeats": 1},
                 "probe": {"prompts": 0}},
}


def _pipeline(tmp_path: Path) -> Path:
    from tests.test_dag import workflow_copy

    wf = workflow_copy(tmp_path)
    (wf / "configs" / "quick.yaml").write_text(yaml.safe_dump(QUICK))
    return wf


def _run(wf: Path, *args: str, ok: bool = True) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HGEMM_FULL="0")
    # targets and flags before --configfile, which takes every word after it
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args, "--configfile", "configs/smoke.yaml",
                        "configs/quick.yaml"], cwd=wf, env=env, capture_output=True, text=True, timeout=900)
    text = r.stdout + r.stderr
    assert (r.returncode == 0) == ok, text[-6000:]
    return text


def _ran(text: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in text.splitlines() if line.startswith(("rule ", "localrule "))}


def _edit(wf: Path, stage: str, key: str, value) -> None:
    path = wf / "configs" / "quick.yaml"
    data = yaml.safe_load(path.read_text())
    node = data.setdefault(stage, {})
    *parents, leaf = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    path.write_text(yaml.safe_dump(data))


def _log(wf: Path, stage: str) -> str:
    return (wf / "results" / "smoke" / "logs" / f"{stage}.log").read_text()


def _metrics(wf: Path, stage: str) -> dict:
    return json.loads((wf / "results" / "smoke" / stage / "metrics.json").read_text())


def _weights(wf: Path, stage: str) -> bytes:
    return (wf / "results" / "smoke" / stage / "model.safetensors").read_bytes()


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a dozen snakemake runs: ~3 min on 2 cores, more on a loaded machine
def test_reruns_of_the_smoke_dag(tmp_path):
    wf = _pipeline(tmp_path)
    res, work = wf / "results" / "smoke", wf / "work" / "smoke"
    assert _ran(_run(wf, "rl_hgemm")) >= {"pretrain", "rl_general", "rl_hgemm"}
    first = _metrics(wf, "rl_hgemm")
    assert read_stamp(work / "rl_hgemm")["finished"] is True

    # 1. a config edit reruns the stage, which trains afresh on its own and replaces its outputs
    time.sleep(1)
    _edit(wf, "rl_hgemm", "grpo.max_steps", 2)
    assert _ran(_run(wf, "rl_hgemm")) == {"rl_hgemm"}
    assert "moved aside to" in _log(wf, "rl_hgemm")
    edited = _metrics(wf, "rl_hgemm")
    assert edited["train"]["global_step"] == 2 and edited["train"]["resumed_from"] is None
    assert edited["config"]["grpo"]["max_steps"] == 2 and first["config"]["grpo"]["max_steps"] == 1
    # reverting the edit reruns it again, and trains again
    _edit(wf, "rl_hgemm", "grpo.max_steps", 1)
    _run(wf, "rl_hgemm")
    assert _metrics(wf, "rl_hgemm")["train"]["steps_this_run"] == 1

    # 2. a deleted work dir with outputs in place: nothing to do; deleted outputs: the stage reruns
    shutil.rmtree(work / "rl_hgemm")
    assert "Nothing to be done" in _run(wf, "rl_hgemm")
    (res / "rl_hgemm" / "curves.json").unlink()
    assert "rl_hgemm" in _ran(_run(wf, "--until", "rl_hgemm"))
    assert (res / "rl_hgemm" / "curves.json").is_file()

    # 3. a retrained input model: the next stage trains again, from the new model
    old_general = _weights(wf, "rl_general")
    _edit(wf, "pretrain", "train.learning_rate", 1.0e-3)
    assert _ran(_run(wf, "rl_general")) == {"pretrain", "rl_general"}
    assert "inputs.model changed" in _log(wf, "rl_general")
    assert _metrics(wf, "rl_general")["train"]["steps_this_run"] == 1
    assert _weights(wf, "rl_general") != old_general

    # 4. -f and -R retrain: a finished checkpoint is never reloaded in place of training
    before = _weights(wf, "rl_general")
    assert _ran(_run(wf, "-f", "rl_general")) == {"rl_general"}
    assert "a finished run" in _log(wf, "rl_general")
    assert _metrics(wf, "rl_general")["train"]["steps_this_run"] == 1
    assert _ran(_run(wf, "-R", "pretrain", "--until", "pretrain")) == {"pretrain"}
    assert _metrics(wf, "pretrain")["train"]["steps_this_run"] == 4
    assert _weights(wf, "rl_general") == before  # -R ... --until left what follows alone

    # 5. an edit with a value that fails inside the job (8 completions a step do not make groups of 3):
    # the previous outputs stay whole, the stage is still to run, and the corrected run succeeds
    curves, weights = (res / "rl_hgemm" / "curves.json").read_bytes(), _weights(wf, "rl_hgemm")
    _edit(wf, "rl_hgemm", "grpo.max_steps", 2)
    _edit(wf, "rl_hgemm", "grpo.num_generations", 3)
    assert "num_generations" in _run(wf, "rl_hgemm", ok=False)
    assert (res / "rl_hgemm" / "curves.json").read_bytes() == curves and _weights(wf, "rl_hgemm") == weights
    assert not (res / "rl_hgemm" / "metrics.json").exists()
    assert "rl_hgemm" in _ran(_run(wf, "-n", "rl_hgemm"))  # with nothing changed since the failure
    _edit(wf, "rl_hgemm", "grpo.num_generations", 4)
    assert "rl_hgemm" in _ran(_run(wf, "rl_hgemm"))
    assert _metrics(wf, "rl_hgemm")["train"]["global_step"] == 2


@pytest.mark.slow
def test_a_failed_pretrain_with_a_bad_value_does_not_block_the_corrected_one(tmp_path):
    # straight through the stage CLI, as a user would retry it
    wf = _pipeline(tmp_path)
    _run(wf, "tokenizer")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "stages.pretrain", "--config", "configs/default.yaml", "--config", "configs/smoke.yaml",
           "--corpus", "results/smoke/corpus", "--tokenizer", "results/smoke/tokenizer", "--work", "w", "--out", "o",
           "--set", "train.max_steps=2", "--set", "train.save_steps=1", "--set", "sample.compile=false",
           "--set", "sample.num_samples=1", "--set", "sample.max_new_tokens=8"]
    bad = subprocess.run(cli + ["--set", "train.max_steps=abc"], cwd=wf, env=env, capture_output=True, text=True)
    assert bad.returncode != 0
    good = subprocess.run(cli, cwd=wf, env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr[-4000:]
    assert json.loads((wf / "o" / "metrics.json").read_text())["train"]["global_step"] == 2

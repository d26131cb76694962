"""Rejection-sampling fine-tuning before GRPO (training/rft.py), on the CPU."""

from __future__ import annotations

import json
import sqlite3

import torch

from stages.common import run_training
from training import rl_hgemm
from training.model import load_causal_lm, load_tokenizer
from training.prompts import END_TOKEN
from training.rft import RFTSettings, fine_tune, keep_best

SETTINGS = RFTSettings(shapes=2, k=3, temperature=1.0, top_p=1.0, batch_size=4, min_speedup=0.5, epochs=8,
                       learning_rate=5e-3, per_device_train_batch_size=2)


def test_each_shape_keeps_its_fastest_verified_completion_at_or_above_the_bar():
    rows = [{"prompt": "p1", "problem_key": "a"}, {"prompt": "p2", "problem_key": "b"}, {"prompt": "p3", "problem_key": "c"}]
    completions = [["slow", "fast", "wrong"], ["below"], ["x", "y"]]
    verdicts = [{"status": "ok", "speedup_vs_best": 0.6}, {"status": "ok", "speedup_vs_best": 0.9},
                {"status": "wrong", "speedup_vs_best": 5.0},   # a wrong kernel's speed counts for nothing
                {"status": "ok", "speedup_vs_best": 0.4},      # verified, under min_speedup
                {"status": "parse_error"}, {"status": "compiled"}]   # nothing verified (a CPU judge)
    kept = keep_best(rows, completions, verdicts, min_speedup=0.5)
    assert kept == [{"prompt": "p1", "completion": "fast", "problem_key": "a", "speedup": 0.9}]


def _completion_loss(model, tokenizer, prompt: str, completion: str) -> float:
    ids = tokenizer(prompt + completion, add_special_tokens=False)["input_ids"]
    n = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    labels = [-100] * n + ids[n:]
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()


def test_fine_tuning_makes_the_kept_completions_likelier(tmp_path, tiny_model_dir):
    tokenizer = load_tokenizer(tiny_model_dir)
    model = load_causal_lm(tiny_model_dir, tokenizer)
    pairs = [{"prompt": "// problem: M=64 N=64 K=64\n", "completion": '#include <hgemm/wgmma_gemm.cuh>\n'},
             {"prompt": "// problem: M=128 N=64 K=64\n", "completion": '#include <hgemm/mma_sync_gemm.cuh>\n'}]
    result = fine_tune(model, tokenizer, pairs, SETTINGS, str(tmp_path / "rft"), max_length=128, bf16=False)
    assert result["steps"] == 8 and result["loss_last"] < result["loss_first"]
    # the saved model (what GRPO then loads) writes the kept completions, ended as the corpus ends them
    saved = load_causal_lm(result["model"], tokenizer)
    after = [_completion_loss(saved, tokenizer, p["prompt"], p["completion"].rstrip() + "\n" + END_TOKEN) for p in pairs]
    before = [_completion_loss(load_causal_lm(tiny_model_dir, tokenizer), tokenizer, p["prompt"],
                               p["completion"].rstrip() + "\n" + END_TOKEN) for p in pairs]
    assert all(a < b for a, b in zip(after, before)), (before, after)


def test_rl_hgemm_runs_its_rft_round_before_grpo_and_says_when_nothing_verified(tmp_path, tiny_model_dir):
    from test_rl_stages import _two_steps

    s = _two_steps(rl_hgemm.RLHgemmSettings, "rl_hgemm", "rft.shapes=2", "rft.k=2", "rft.batch_size=4",
                   "probe.prompts=0", "judge.gpu=false")   # compile-only rewards on a GPU host too
    out, work = tmp_path / "out", tmp_path / "work"
    metrics = run_training(rl_hgemm.HgemmRL(s, tiny_model_dir, None, str(work), str(out)), str(work), str(out))
    rft = metrics["rft"]
    assert (rft["shapes"], rft["samples"], rft["verified"], rft["kept"]) == (2, 4, 0, 0)
    assert rft["fine_tune"] is None and "no GPU" in rft["note"]
    conn = sqlite3.connect(out / "kernels.sqlite")
    stages = dict(conn.execute("SELECT stage, COUNT(*) FROM evaluations GROUP BY stage").fetchall())
    assert stages.get("rl_hgemm_rft", 0) >= 4 and stages.get("rl_hgemm", 0) > 0   # judged and recorded apart
    held = {p["key"] for p in json.loads((out / "heldout.json").read_text())["heldout"]}
    rft_keys = {r[0] for r in conn.execute("SELECT DISTINCT problem_key FROM evaluations WHERE stage = 'rl_hgemm_rft'")}
    assert rft_keys and not rft_keys & held
    # a run resumed from a GRPO checkpoint does not sample again: it trains the fine-tuned model saved
    # before the interruption (GRPO's KL reference), the checkpoint restoring the weights
    resumed = tmp_path / "resumed"
    (resumed / "checkpoint-1").mkdir(parents=True)
    job = rl_hgemm.HgemmRL(s, tiny_model_dir, None, str(resumed), str(tmp_path / "out2"))
    tokenizer = load_tokenizer(tiny_model_dir)
    model, result = job.warm_start("the starting policy", tokenizer, None, None, None, resumable=True)
    assert model == "the starting policy" and result["note"].endswith("no fine-tuned model was saved before it")
    load_causal_lm(tiny_model_dir, tokenizer).save_pretrained(resumed / "rft" / "model")
    model, result = job.warm_start("the starting policy", tokenizer, None, None, None, resumable=True)
    assert model.config._name_or_path == str(resumed / "rft" / "model") and "fine-tuned model is" in result["note"]

"""Rejection-sampling fine-tuning (RFT): a warm start for GRPO from the policy's own best kernels.

GRPO learns only from the spread within a group of completions; a weak policy spends its first steps
finding what it could already write on its best tries. RFT takes those tries first, as Kevin-32B and
CUDA Agent warm-start before RL: for `shapes` training shapes, the policy samples `k` completions from
the prompts GRPO would draw (contrastive context or bare, training.context.DrawnPrompts), the
harness judges them exactly as GRPO's reward does (KernelReward: the same problems, recheck and
kernel-database rows, under stage `<stage>_rft`), and each shape's fastest verified completion at or
above `min_speedup` over the strongest baseline becomes a (prompt, completion) pair. TRL's SFTTrainer
fine-tunes the policy on those pairs, the loss on the completion only (each completion ended with
`<|end|>`, as the corpus frames a kernel); the fine-tuned model is saved and GRPO loads it, so that
its KL reference is the fine-tuned model too. Without a GPU nothing is verified, so nothing is kept and the policy is left as it
was (the metrics say so).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from datasets import Dataset

from training.probe import generation_prompt
from training.prompts import END_TOKEN
from training.sampling import generate_completions


@dataclass
class RFTSettings:
    """The `rl_hgemm.rft:` section (values: configs/default.yaml)."""

    shapes: int  # training shapes sampled, spread over the buckets; 0: no RFT
    k: int  # completions sampled per shape
    temperature: float
    top_p: float
    batch_size: int  # sequences per generate() call
    min_speedup: float  # a shape's best is kept at or above this speedup over the strongest baseline
    epochs: float  # passes of the fine-tuning over the kept pairs
    learning_rate: float
    per_device_train_batch_size: int


def keep_best(rows: list[dict], completions: list[list[str]], verdicts: list[dict], min_speedup: float) -> list[dict]:
    """Per prompt row, its fastest verified completion at or above min_speedup, as
    {prompt, completion, problem_key, speedup}; verdicts run over the completions row by row."""
    kept, i = [], 0
    for row, group in zip(rows, completions):
        best = None
        for text in group:
            v = verdicts[i]
            i += 1
            speedup = v.get("speedup_vs_best")
            if v.get("status") == "ok" and speedup and speedup >= min_speedup and (best is None or speedup > best[1]):
                best = (text, speedup)
        if best:
            kept.append({"prompt": row["prompt"], "completion": best[0], "problem_key": row["problem_key"],
                         "speedup": best[1]})
    return kept


def fine_tune(model, tokenizer, pairs: list[dict], settings: RFTSettings, work_dir: str, max_length: int,
              bf16: bool) -> dict:
    """TRL SFT of `model` in place on the (prompt, completion) pairs, loss on the completions only; the
    model and tokenizer are saved to <work_dir>/model. Returns the losses logged, the seconds it took
    and where the model is."""
    from trl import SFTConfig, SFTTrainer  # TRL on first use, as training.grpo does

    began = time.perf_counter()
    data = Dataset.from_list([{"prompt": p["prompt"], "completion": p["completion"].rstrip() + "\n" + END_TOKEN}
                              for p in pairs])
    config = SFTConfig(output_dir=work_dir, num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
                       per_device_train_batch_size=settings.per_device_train_batch_size, max_length=max_length,
                       completion_only_loss=True, packing=False, bf16=bf16, logging_steps=1, save_strategy="no",
                       gradient_checkpointing=False, report_to=[], lr_scheduler_type="constant", seed=0)
    trainer = SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    path = f"{work_dir}/model"
    trainer.save_model(path)
    tokenizer.save_pretrained(path)
    steps = trainer.state.global_step
    del trainer   # its optimizer state, before GRPO builds its own
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"steps": steps, "loss_first": losses[0] if losses else None,
            "loss_last": losses[-1] if losses else None, "seconds": time.perf_counter() - began, "model": path}


def rejection_round(model, tokenizer, rows: list[dict], reward, settings: RFTSettings, max_new_tokens: int,
                    work_dir: str, max_length: int, bf16: bool) -> dict:
    """Sample, judge (`reward`: a KernelReward, which records every verdict), keep each shape's best and
    fine-tune on them. rows: drawn dataset rows (prompt, problems, problem_key, shape_class). Returns
    the round's metrics."""
    began = time.perf_counter()
    model.to("cuda" if torch.cuda.is_available() else "cpu")   # where GRPO's trainer would put it
    completions = generate_completions(model, tokenizer, [generation_prompt(tokenizer, r["prompt"]) for r in rows],
                                       settings.k, max_new_tokens, settings.temperature, settings.top_p,
                                       settings.batch_size)
    flat = [(r, c) for r, group in zip(rows, completions) for c in group]
    _, metrics = reward.score([c for _, c in flat], [r["problems"] for r, _ in flat],
                              [r["problem_key"] for r, _ in flat], [r["shape_class"] for r, _ in flat])
    verdicts = reward.last_verdicts
    kept = keep_best(rows, completions, verdicts, settings.min_speedup)
    out = {"shapes": len(rows), "samples": len(flat), "verified": sum(v.get("status") == "ok" for v in verdicts),
           "kept": len(kept), "kept_speedup_geomean": (math.exp(sum(math.log(p["speedup"]) for p in kept) / len(kept))
                                                        if kept else None),
           "sample_seconds": time.perf_counter() - began, "correct_rate": metrics.get("kernel/correct_rate")}
    if not kept:
        out["fine_tune"] = None
        out["note"] = "no verified completion to fine-tune on" + ("" if reward.judge.gpu else " (no GPU: nothing is verified)")
        return out
    out["fine_tune"] = fine_tune(model, tokenizer, kept, settings, work_dir, max_length, bf16)
    return out

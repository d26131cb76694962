"""Pretraining throughput: the configured setup against the same model under plain HF Trainer defaults.

    python -m benchmarks.pretrain_throughput [--config configs/default.yaml [--config FILE]] [--tokenizer DIR]
                                             [--corpus DIR] [--steps 30] [--warmup 5] [--out FILE]

Two arms train the same freshly initialised model for warmup + steps optimizer steps on the same data:
  configured   what stages.pretrain does: packed blocks, bf16 autocast, fused AdamW, TF32, the YAML's
               batch size and gradient checkpointing setting;
  hf_defaults  TrainingArguments left at their defaults (fp32, default optimizer, no TF32), one row per
               document truncated to block_size and padded per batch (DataCollatorForLanguageModeling
               behaviour: pads are -100 in labels), the same number of sequences per step.
Only real tokens count (pads do not) and only steps after the warm-up are timed, with a device sync at
both ends. MFU is achieved model FLOP/s over the GPU's dense bf16 peak for both arms, so the fp32 arm is
measured against the same ceiling. Without --corpus the documents are random token ids whose lengths
follow a log-normal around 700 tokens, like kernel sources. On a CPU a tiny model runs a few steps:
that checks the script, not the figure.

Prints a table and writes JSON to $OUT/pretrain_throughput.json when $OUT is set, else to --out.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
from pathlib import Path

import torch
from accelerate.state import AcceleratorState
from datasets import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

from stages.common import build_dataclass, load_stage_config, write_json
from training.data import load_corpus, pack_blocks, tokenize_documents
from training.model import build_model, load_tokenizer
from training.pretrain import PretrainConfig, build_training_arguments, environment
from training.throughput import mfu, model_flops_per_token, peak_flops

ROOT = Path(__file__).resolve().parents[1]


class StepTimer(TrainerCallback):
    """Wall time of optimizer steps warmup .. warmup+steps-1, synchronised with the device."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self.start = self.end = None

    def _sync(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == self.warmup:
            self._sync()
            self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        self._sync()
        self.end = time.perf_counter()


class CountingPadCollator:
    """Pads a batch of documents to its longest row; counts the real tokens of every batch in order."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id
        self.real_tokens: list[int] = []
        self.padded_tokens: list[int] = []

    def __call__(self, rows):
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
            mask[i, : len(r["input_ids"])] = 1
        self.real_tokens.append(int(mask.sum()))
        self.padded_tokens.append(ids.numel())
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class CountingBlockCollator(CountingPadCollator):
    """Packed blocks are all the same length and all real tokens."""

    def __call__(self, rows):
        ids = torch.tensor([r["input_ids"] for r in rows])
        self.real_tokens.append(ids.numel())
        self.padded_tokens.append(ids.numel())
        return {"input_ids": ids, "labels": ids.clone()}


class VocabOnly:
    """Enough of a tokenizer to size a scratch model when no tokenizer folder is given."""

    bos_token_id, eos_token_id, pad_token_id = 1, 2, 0

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def synthetic_documents(n: int, vocab: int, first_id: int, seed: int = 0) -> Dataset:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.exp(math.log(700) + 0.8 * torch.randn(n, generator=g)).clamp(32, 8192).long().tolist()
    return Dataset.from_dict({"input_ids": [torch.randint(first_id, vocab, (k,), generator=g).tolist() for k in lengths]})


def run_arm(name, cfg, make_model, args, dataset, collator, warmup, steps, context_of):
    # Each arm has its own precision; accelerate keeps one process-wide state and refuses a second
    # Trainer with a different mixed_precision unless the state is cleared first.
    AcceleratorState._reset_state(reset_partial_state=True)
    set_seed(cfg.train.seed)
    model = make_model()
    timer = StepTimer(warmup)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator, callbacks=[timer])
    trainer.train()
    ga = args.gradient_accumulation_steps
    real = sum(collator.real_tokens[warmup * ga:(warmup + steps) * ga])
    padded = sum(collator.padded_tokens[warmup * ga:(warmup + steps) * ga])
    seconds = timer.end - timer.start
    tps = real / seconds
    rows_per_step = args.per_device_train_batch_size * ga
    context = context_of(real, steps * rows_per_step)
    fpt = model_flops_per_token(model, context)
    result = {
        "tokens_per_second": tps,
        "mfu": mfu(tps, fpt, peak_flops()),
        "seconds": seconds,
        "timed_steps": steps,
        "real_token_fraction": real / padded,
        "mean_context": context,
        "bf16": args.bf16,
        "optim": str(args.optim),
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
    }
    del trainer, model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    print(f"{name}: {tps:,.0f} tokens/s")
    return result


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", default=None,
                   help="experiment config, repeatable, each laid over the one before (as the stages take it); "
                        "default: configs/default.yaml, with configs/smoke.yaml over it on a CPU")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder; without it a 16384-token vocabulary is assumed")
    p.add_argument("--corpus", default=None, help="corpus folder to take documents from; without it, synthetic documents")
    p.add_argument("--steps", type=int, default=None, help="timed optimizer steps per arm (default 30 on GPU, 3 on CPU)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5 on GPU, 1 on CPU)")
    p.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "pretrain_throughput.json"),
                   help="JSON result path when $OUT is not set")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override, as in the stages")
    a = p.parse_args(argv)
    on_gpu = torch.cuda.is_available()
    steps = a.steps or (30 if on_gpu else 3)
    warmup = a.warmup if a.warmup is not None else (5 if on_gpu else 1)

    configs = a.config or [str(ROOT / "configs" / "default.yaml")] + ([] if on_gpu else [str(ROOT / "configs" / "smoke.yaml")])
    config = load_stage_config(configs, "pretrain", a.set)
    cfg = build_dataclass(PretrainConfig, config, "pretrain")
    block = cfg.train.block_size
    rows_needed = (warmup + steps) * cfg.train.per_device_train_batch_size * cfg.train.gradient_accumulation_steps

    tok = load_tokenizer(a.tokenizer) if a.tokenizer else VocabOnly(16384)
    vocab, pad_id = len(tok), tok.pad_token_id
    make_model = lambda: build_model(cfg.model, tok)  # noqa: E731

    if a.corpus and a.tokenizer:
        docs = tokenize_documents(load_corpus(a.corpus)["train"], tok)
    else:
        docs = synthetic_documents(max(rows_needed * 4, 64), vocab, first_id=8)
    packed = pack_blocks(docs, block)
    while len(packed) < rows_needed:  # a small corpus is repeated rather than running out of data
        packed = Dataset.from_dict({k: packed[k] * 2 for k in packed.column_names})
    truncated = docs.map(lambda r: {"input_ids": r["input_ids"][:block]}, keep_in_memory=True)

    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "pretrain_throughput"
    common = dict(max_steps=warmup + steps, report_to=[], save_strategy="no", eval_strategy="no", logging_steps=10**6,
                  dataloader_num_workers=0, disable_tqdm=True)

    configured_args = build_training_arguments(cfg.train, str(tmp / "configured"), None, **common)
    hf_args = TrainingArguments(output_dir=str(tmp / "hf_defaults"), use_cpu=not on_gpu,
                                per_device_train_batch_size=cfg.train.per_device_train_batch_size,
                                gradient_accumulation_steps=cfg.train.gradient_accumulation_steps, **common)

    arms = {
        "hf_defaults": run_arm("hf_defaults", cfg, make_model, hf_args, truncated, CountingPadCollator(pad_id),
                               warmup, steps, lambda real, rows: real / rows),
        "configured": run_arm("configured", cfg, make_model, configured_args, packed, CountingBlockCollator(pad_id),
                              warmup, steps, lambda real, rows: block),
    }
    speedup = arms["configured"]["tokens_per_second"] / arms["hf_defaults"]["tokens_per_second"]
    result = {
        "benchmark": "pretrain_throughput",
        "config": config,
        "data": "corpus " + a.corpus if a.corpus and a.tokenizer else "synthetic log-normal documents (median 700 tokens)",
        "peak_bf16_flops": peak_flops(),
        "arms": arms,
        "configured_over_hf_defaults": speedup,
        "environment": environment(),
        "note": None if on_gpu else "CPU: a tiny model and a few steps; checks the script, not the figure",
    }

    print(f"\n{'arm':<12} {'tokens/s':>12} {'MFU':>7} {'real tok':>9} {'peak GB':>8}")
    for name, r in arms.items():
        mfu_text = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        mem = f"{r['peak_memory_gb']:.1f}" if r["peak_memory_gb"] is not None else "n/a"
        print(f"{name:<12} {r['tokens_per_second']:>12,.0f} {mfu_text:>7} {r['real_token_fraction']:>9.1%} {mem:>8}")
    print(f"configured / hf_defaults: {speedup:.2f}x")

    path = Path(os.environ["OUT"]) / "pretrain_throughput.json" if os.environ.get("OUT") else Path(a.out)
    write_json(path, result)
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()

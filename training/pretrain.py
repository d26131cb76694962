"""Continued pretraining on the CUDA corpus with the transformers Trainer, then a sampling check.

`Pretraining(settings, ...)` checks what can fail before any state is touched (the sample problems,
the TrainingArguments) and says what a checkpoint depends on; the stage prepares the work dir for
that (stages.common.run_training) and calls `run`, which reads top to bottom: load tokenizer and
model, pack the corpus, train (resuming from the last checkpoint), evaluate loss and perplexity, save
model and tokenizer into the output folder, sample HGEMM candidates from the saved model and count
how many parse and compile, and return the metrics.

Several GPUs: launch the same command under torchrun or accelerate with `--deepspeed` pointing at a
configs/deepspeed/*.json; the Trainer does the rest. Only rank 0 samples and returns metrics.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import transformers
from transformers import Trainer, TrainerCallback, TrainerState, TrainingArguments, default_data_collator, set_seed
from transformers.trainer_utils import get_last_checkpoint

from hgemm.files import write_json
from hgemm.problem import Problem
from training.data import load_corpus, packed_splits
from training.model import (
    SAMPLING_ATTENTION,
    ModelSettings,
    build_model,
    count_parameters,
    load_causal_lm,
    tokenizer_for,
)
from training.sampling import sample_and_check
from training.throughput import mfu, model_flops_per_token, peak_flops


@dataclass
class TrainSettings:
    """The `train:` section (values: configs/default.yaml). Names follow TrainingArguments where they map onto it."""

    block_size: int
    max_steps: int
    per_device_train_batch_size: int
    per_device_eval_batch_size: int
    gradient_accumulation_steps: int
    learning_rate: float
    weight_decay: float
    adam_beta2: float
    warmup_steps: int
    lr_scheduler_type: str
    max_grad_norm: float
    bf16: bool | str  # auto: on where the GPU supports it, off on CPU
    gradient_checkpointing: bool
    torch_compile: bool
    optim: str  # auto: fused AdamW on GPU, plain AdamW on CPU
    logging_steps: int
    eval_steps: int
    save_steps: int
    save_total_limit: int
    max_eval_blocks: int | None
    # A wall-clock cap on the training loop (seconds): training stops and checkpoints when it passes,
    # so a sized run stays inside its time slot even on a slower machine. null: no cap.
    max_train_seconds: float | None
    dataloader_num_workers: int
    map_workers: int | None  # datasets.map processes; null: chosen from corpus size
    seed: int
    # Repeats per document by corpus source (training.data.weight_sources); unnamed sources: 1.
    source_weights: dict[str, float]


# Settings that do not change what a checkpoint means: editing them must not block a resume.
RESUME_NEUTRAL = (
    "logging_steps", "eval_steps", "save_steps", "save_total_limit", "max_eval_blocks",
    "max_train_seconds", "dataloader_num_workers", "map_workers", "per_device_eval_batch_size",
)


@dataclass
class SampleSettings:
    """The `sample:` section: the after-training check of what the model writes."""

    num_samples: int
    max_new_tokens: int
    temperature: float
    top_p: float
    batch_size: int
    # [M, N, K] or [M, N, K, batch] or [M, N, K, batch, layout]; samples are spread over them.
    problems: list
    compile: bool
    compile_arch: str | None  # passed to hgemm.compile; null: its default
    prompt_arch: str
    verify_timeout_s: float  # per candidate: a hang past this is `timeout`


@dataclass
class LaunchSettings:
    """How the DAG starts the stage (rules/pretrain.smk): as one process, or data-parallel under torchrun."""

    processes: int | str  # 1: one process; N: N under torchrun (on CPUs over gloo); gpus: one per visible GPU
    deepspeed: str | None  # a DeepSpeed JSON (configs/deepspeed/zero2.json, zero3.json) for the Trainer; null: none

    def __post_init__(self):
        if not (self.processes == "gpus" or (isinstance(self.processes, int) and self.processes >= 1)):
            raise ValueError(f"launch.processes: {self.processes!r} is neither a count nor 'gpus'")


@dataclass
class PretrainConfig:
    """The `pretrain:` section."""

    model: ModelSettings
    train: TrainSettings
    sample: SampleSettings
    launch: LaunchSettings

    def sample_problems(self) -> list[Problem]:
        problems = []
        for row in self.sample.problems:
            if not 3 <= len(row) <= 5:
                raise ValueError(f"pretrain.sample.problems: each entry is [M, N, K(, batch(, layout))], got {row}")
            m, n, k, *rest = row
            problems.append(Problem(m, n, k, *rest, shape_class="pretrain-sample"))
        return problems

    def resume_settings(self, deepspeed_config: dict | None) -> dict:
        """The settings a checkpoint depends on: model, training (less the neutral ones), DeepSpeed."""
        train = {k: v for k, v in asdict(self.train).items() if k not in RESUME_NEUTRAL}
        return {"model": asdict(self.model), "train": train, "deepspeed": deepspeed_config}


class TrainClock(TrainerCallback):
    """Times optimizer steps (evaluation and checkpoint saves excluded) and enforces max_train_seconds."""

    def __init__(self, max_seconds: float | None, evaluate_on_stop: bool = False):
        self.max_seconds = max_seconds
        self.evaluate_on_stop = evaluate_on_stop
        self.step_seconds = 0.0
        self.steps = 0
        self.stopped_by_budget = False
        self._began = self._step_start = None

    def on_train_begin(self, args, state, control, **kw):
        self._began = time.perf_counter()

    def on_step_begin(self, args, state, control, **kw):
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        if self._step_start is not None:
            self.step_seconds += now - self._step_start
            self.steps += 1
        if self.max_seconds is not None and _agreed(now - self._began > self.max_seconds, args.device):
            self.stopped_by_budget = True
            control.should_training_stop = True
            control.should_save = True
            control.should_evaluate = control.should_evaluate or self.evaluate_on_stop


def _agreed(decision: bool, device) -> bool:
    """Rank 0's decision, on every rank. Clocks differ between ranks, and ranks that stop training at
    different steps leave one waiting in a gradient all-reduce forever (a time-capped ZeRO-2 run hung
    that way on two H200s)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return decision
    flag = torch.tensor([1.0 if decision else 0.0], device=device if dist.get_backend() == "nccl" else "cpu")
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def _use_bf16(setting) -> bool:
    if setting == "auto":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(setting)


def _training_arguments(**kwargs) -> TrainingArguments:
    """TrainingArguments across transformers 5.x: newer releases renamed gradient_checkpointing to
    activation_checkpointing and moved the TensorBoard folder to an environment variable."""
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    if "activation_checkpointing" in names and "gradient_checkpointing" in kwargs:
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
    logging_dir = kwargs.pop("logging_dir")
    os.environ["TENSORBOARD_LOGGING_DIR"] = logging_dir
    if "logging_dir" in names:
        kwargs["logging_dir"] = logging_dir
    return TrainingArguments(**kwargs)


def build_training_arguments(cfg: TrainSettings, work_dir: str, deepspeed: str | None, **overrides) -> TrainingArguments:
    """TrainingArguments for the stage; overrides (TrainingArguments names) replace single values."""
    on_gpu = torch.cuda.is_available()
    optim = cfg.optim if cfg.optim != "auto" else ("adamw_torch_fused" if on_gpu else "adamw_torch")
    kwargs = dict(
        output_dir=work_dir,
        logging_dir=str(Path(work_dir) / "tensorboard"),
        report_to=["tensorboard"],
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        per_device_eval_batch_size=cfg.per_device_eval_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        adam_beta2=cfg.adam_beta2,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type=cfg.lr_scheduler_type,
        max_grad_norm=cfg.max_grad_norm,
        bf16=_use_bf16(cfg.bf16),
        tf32=True if on_gpu else None,
        gradient_checkpointing=cfg.gradient_checkpointing,
        torch_compile=cfg.torch_compile,
        optim=optim,
        logging_steps=cfg.logging_steps,
        eval_strategy="steps",
        eval_steps=cfg.eval_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        dataloader_num_workers=cfg.dataloader_num_workers if on_gpu else 0,
        dataloader_pin_memory=on_gpu,
        seed=cfg.seed,
        deepspeed=deepspeed,
        disable_tqdm=False,
        # several processes without GPUs (torchrun on CPUs): transformers runs them data-parallel only
        # with a CPU backend named; on GPUs it picks NCCL itself
        ddp_backend=None if on_gpu or int(os.environ.get("WORLD_SIZE", "1")) == 1 else "gloo",
    )
    kwargs.update(overrides)
    return _training_arguments(**kwargs)


def environment() -> dict:
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu ({os.cpu_count()} cores)",
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
    }
    try:
        import deepspeed  # only its version, where it is installed (it is slow to import)

        env["deepspeed"] = deepspeed.__version__
    except Exception:
        pass
    return env


def _loss_curve(log_history: list[dict]) -> list[dict]:
    keep = ("step", "loss", "eval_loss", "learning_rate", "grad_norm")
    return [{k: row[k] for k in keep if k in row} for row in log_history if "loss" in row or "eval_loss" in row]


def _checkpoint_state(checkpoint: str) -> TrainerState:
    return TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))


class Pretraining:
    """One pretraining run (stages.common.TrainingJob): built from the settings and inputs, it checks what
    can fail before any state is touched; `run` trains, saves, samples and returns the metrics."""

    def __init__(self, settings: PretrainConfig, corpus_dir: str, tokenizer_dir: str | None, work_dir: str,
                 deepspeed: str | None = None):
        self.settings, self.corpus_dir, self.tokenizer_dir = settings, corpus_dir, tokenizer_dir
        self.work_dir, self.deepspeed = work_dir, deepspeed
        self.wall_start = time.perf_counter()
        self.problems = settings.sample_problems()  # a bad problem list fails now, not after training
        ds_config = json.loads(Path(deepspeed).read_text()) if deepspeed else None
        # A bad scheduler or optimiser name fails here, with the old state intact.
        self.args = build_training_arguments(settings.train, work_dir, deepspeed)
        self.resume_settings = settings.resume_settings(ds_config)
        self.resume_inputs = {"corpus": corpus_dir,
                              "tokenizer": None if settings.model.use_model_tokenizer else tokenizer_dir,
                              "init_model": settings.model.name_or_path}

    def run(self, out: Path, resumable: bool) -> dict | None:
        """Train (resuming the work dir's last checkpoint when `resumable`), save model and tokenizer into
        `out` with loss_curve.json and samples.jsonl; the metrics on rank 0, None on other ranks."""
        cfg, args, work_dir, tokenizer_dir = self.settings, self.args, self.work_dir, self.tokenizer_dir
        last_checkpoint = get_last_checkpoint(work_dir) if resumable else None
        set_seed(cfg.train.seed)

        tokenizer = tokenizer_for(cfg.model, tokenizer_dir)
        # A run whose last checkpoint already reached max_steps is not trained again: the Trainer would
        # take one extra step on resume. Its weights come straight from that checkpoint instead.
        finished = last_checkpoint is not None and \
            _checkpoint_state(last_checkpoint).global_step >= cfg.train.max_steps
        if finished:
            print(f"{last_checkpoint} already reached max_steps ({cfg.train.max_steps}): its weights are used, "
                  "nothing is trained", flush=True)
            model = load_causal_lm(last_checkpoint, tokenizer, cfg.model.attn_implementation)
        else:
            model = build_model(cfg.model, tokenizer)
        if cfg.train.block_size > model.config.max_position_embeddings:
            raise ValueError(
                f"train.block_size {cfg.train.block_size} exceeds the model's "
                f"max_position_embeddings {model.config.max_position_embeddings}"
            )
        model.config.use_cache = False  # the KV cache is useless in training and conflicts with checkpointing
        # Counted before training: under ZeRO-3 the parameters are sharded away from this module.
        n_params = count_parameters(model)
        flops_per_token = model_flops_per_token(model, cfg.train.block_size)

        token_shares: dict = {}
        train_ds, eval_ds = packed_splits(
            load_corpus(self.corpus_dir), tokenizer, cfg.train.block_size, cfg.train.max_eval_blocks,
            cfg.train.map_workers, source_weights=cfg.train.source_weights, seed=cfg.train.seed, shares=token_shares,
        )
        clock = TrainClock(cfg.train.max_train_seconds)
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train_ds,
            eval_dataset=eval_ds,
            data_collator=default_data_collator,
            processing_class=tokenizer,
            callbacks=[clock],
        )
        if finished:
            trainer.state = _checkpoint_state(last_checkpoint)
            run_mean_loss = None
        else:
            run_mean_loss = trainer.train(resume_from_checkpoint=last_checkpoint).training_loss
        eval_metrics = trainer.evaluate()
        model.config.use_cache = True  # the saved model is for generation, where the KV cache matters
        trainer.save_model(str(out))  # gathers ZeRO-3 shards when the DeepSpeed config asks for it
        if not trainer.is_world_process_zero():
            return None
        tokenizer.save_pretrained(str(out))
        curve = _loss_curve(trainer.state.log_history)
        global_step = trainer.state.global_step
        write_json(out / "loss_curve.json", curve)

        # Sample from what was saved: this is the model the RL stages will load.
        tokens_per_step = (cfg.train.block_size * args.per_device_train_batch_size * args.gradient_accumulation_steps
                           * args.world_size)
        tokens_per_second = clock.steps * tokens_per_step / clock.step_seconds if clock.step_seconds else None
        del trainer, model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

        sample_start = time.perf_counter()
        on_gpu = torch.cuda.is_available()
        final = load_causal_lm(str(out), tokenizer, SAMPLING_ATTENTION,
                               dtype=torch.bfloat16 if on_gpu else torch.float32)
        final.to("cuda" if on_gpu else "cpu")
        records, sampling = sample_and_check(
            final, tokenizer, self.problems, cfg.sample.num_samples, cfg.sample.max_new_tokens,
            cfg.sample.temperature, cfg.sample.top_p, cfg.sample.batch_size,
            compile=cfg.sample.compile, arch=cfg.sample.compile_arch, prompt_arch=cfg.sample.prompt_arch,
            verify_timeout_s=cfg.sample.verify_timeout_s,
        )
        sampling["seconds"] = time.perf_counter() - sample_start
        (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

        eval_loss = eval_metrics.get("eval_loss")
        return {
            "stage": "pretrain",
            "train_loss": next((row["loss"] for row in reversed(curve) if "loss" in row), None),  # last logged
            "eval_loss": eval_loss,
            "perplexity": math.exp(eval_loss) if eval_loss is not None and eval_loss < 50 else None,
            "tokens_per_second": tokens_per_second,
            "mfu": mfu(tokens_per_second or 0.0, flops_per_token, peak_flops()),
            "parse_rate": sampling["parse_rate"],
            "compile_rate": sampling["compile_rate"] if sampling["compile_rate"] is not None else sampling["compile"],
            "pass_rate": sampling["pass_rate"],  # None on a CPU machine: nothing was run
            "wall_time_s": time.perf_counter() - self.wall_start,
            "train": {
                "global_step": global_step,
                "train_loss_mean_this_run": run_mean_loss,
                "steps_this_run": clock.steps,
                "resumed_from": last_checkpoint,
                "stopped_by_time_budget": clock.stopped_by_budget,
                "tokens_per_step": tokens_per_step,
                "tokens_this_run": clock.steps * tokens_per_step,
                "train_blocks": len(train_ds),
                "eval_blocks": len(eval_ds),
                "source_weights": cfg.train.source_weights,
                "source_token_share": token_shares,
                "bf16": args.bf16,
                "gradient_checkpointing": cfg.train.gradient_checkpointing,
                "deepspeed": self.deepspeed,
                "model_flops_per_token": flops_per_token,
                "step_seconds": clock.step_seconds,
            },
            "model": {"init": cfg.model.init, "name_or_path": cfg.model.name_or_path, "parameters": n_params,
                      "vocab_size": len(tokenizer)},
            "sampling": sampling,
            "environment": environment(),
            "config": asdict(cfg),
        }

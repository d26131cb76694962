"""What both RL stages share: settings, the policy, TRL's GRPOTrainer built from YAML, curves and resume.

A stage supplies a prompt dataset (columns: prompt, problems, problem_key, shape_class) and a reward
function (training.rewards.KernelReward); `train_grpo` does the rest with TRL's GRPOTrainer: no
hand-written loop. Checkpoints land in the work folder and a rerun of an unfinished run with the same
settings and inputs resumes from the last one (stages.common.prepare_work_dir); TensorBoard logs go to
<work>/tensorboard; `curves.json` is rewritten from the trainer's log history at every logging step,
so it also survives a resume.

The `grpo:` section is trl.GRPOConfig's, handed to it whole (`build_grpo_config`), but for the keys of
OWN_GRPO_KEYS, which are ours: TRL 1.16 has no `max_prompt_length`, so the stages keep their prompts
inside it themselves (rl_hgemm drops contrastive examples until the prompt fits; see `prompt_tokens`),
and `max_train_seconds` is the wall-clock cap TrainClock enforces. `bf16` and `optim` also take `auto`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, PreTrainedTokenizerBase, TrainerCallback, set_seed
from transformers.trainer_utils import get_last_checkpoint

from hgemm.entry import EVAL_PHASES, JUDGE_PHASES, EvalOptions
from hgemm.files import write_json
from hgemm.judge import KernelJudge
from hgemm.pool import evaluation_gpus, visible_gpus
from training.model import SAMPLING_ATTENTION, load_causal_lm, load_tokenizer, stop_token_ids
from training.pretrain import TrainClock, _checkpoint_state, environment
from training.rewards import KernelReward, class_rewards


# Keys of the `grpo:` section that are ours, not trl.GRPOConfig's; the rest goes to GRPOConfig whole.
OWN_GRPO_KEYS = ("max_prompt_length", "max_train_seconds")
# GRPOConfig settings the stages set themselves (where checkpoints, logs and TensorBoard files go, how
# prompts are loaded): a config that names one is refused rather than silently overridden.
STAGE_GRPO_KEYS = ("output_dir", "report_to", "logging_dir", "save_strategy", "eval_strategy",
                   "dataloader_num_workers", "dataloader_pin_memory", "disable_tqdm", "activation_checkpointing")
# Settings that do not change what a checkpoint means: editing them must not block a resume.
RESUME_NEUTRAL = ("logging_steps", "save_steps", "save_total_limit", "eval_steps", "eval_on_start",
                  "num_generations_eval", "per_device_eval_batch_size", "max_train_seconds",
                  "log_completions", "cache_implementation")


def check_grpo_section(section: dict, where: str = "grpo") -> None:
    """A `grpo:` section's keys: OWN_GRPO_KEYS, all present, and otherwise trl.GRPOConfig's dataclass
    fields that the stages do not set themselves. A ValueError of one line naming the first bad key."""
    from trl import GRPOConfig  # TRL only where a grpo: section is checked or trained with

    if not isinstance(section, dict):
        raise ValueError(f"{where}: expected a mapping of trl.GRPOConfig settings, got {type(section).__name__}")
    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    for key in section:
        if key in STAGE_GRPO_KEYS:
            raise ValueError(f"{where}: {key!r} is set by the stage, not by the config")
        if key not in known and key not in OWN_GRPO_KEYS:
            raise ValueError(f"{where}: unknown key {key!r}: not a trl.GRPOConfig setting, nor one of ours "
                             f"({', '.join(OWN_GRPO_KEYS)})")
    missing = [k for k in OWN_GRPO_KEYS if k not in section]
    if missing:
        raise ValueError(f"{where}: missing setting(s) {missing}")


def grpo_resume_settings(section: dict) -> dict:
    """The grpo settings an RL checkpoint depends on: the section less RESUME_NEUTRAL."""
    return {k: v for k, v in section.items() if k not in RESUME_NEUTRAL}


@dataclass
class JudgeSettings:
    """The `judge:` section: how candidates are evaluated (hgemm.judge.KernelJudge)."""

    gpu: bool | str  # auto: time on the GPU when one is visible, else compile only
    arch: str | None  # nvcc target; null: the GPU's, or sm_90a without one
    compile_workers: int | None  # null: all cores
    verify_timeout_s: float  # per candidate: a hang past this is `timeout`
    timing_timeout_s: float  # silence while timing a problem (the worker speaks after every batch)
    reps: int
    target_batch_ms: float
    timing_method: str
    baselines: list[str]  # the reward is against the strongest of these
    distributions: list[str]
    recheck_sets: int
    eval_gpus: str | list[int]  # auto, all or GPU indices: where rewards are timed (hgemm.pool.evaluation_gpus)

    def make_judge(self):
        options = EvalOptions(
            distributions=tuple(self.distributions), reps=self.reps, target_batch_ms=self.target_batch_ms,
            timing_method=self.timing_method, baselines=tuple(self.baselines), recheck_sets=self.recheck_sets,
            seed=None,  # fresh inputs on every evaluation: a re-check really is a second opinion
        )
        gpu = None if self.gpu == "auto" else bool(self.gpu)
        visible = visible_gpus()
        gpus = evaluation_gpus(self.eval_gpus, visible) if visible else None
        if gpus:
            print(f"rewards are timed on GPU(s) {gpus}; the policy trains on GPU {visible[0]}", flush=True)
        return KernelJudge(options, gpu=gpu, arch=self.arch, verify_timeout_s=self.verify_timeout_s,
                           timing_timeout_s=self.timing_timeout_s, compile_workers=self.compile_workers,
                           gpus=gpus)


# ------------------------------------------------------------------------------ policy and prompts

# The policy's forward and backward run sdpa: its memory-efficient kernels keep O(length) a head for
# the backward pass, where eager attention keeps each layer's batch x heads x L x L weights in fp32 and
# bf16 (32 sequences of 3072 tokens, 12 heads: 22 GB a layer, 260 GB for 12 layers, more than an H200
# holds). Generation switches to SAMPLING_ATTENTION, which samples fastest.
TRAINING_ATTENTION = "sdpa"


def load_policy(model_dir: str) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """The model a previous stage saved, with its tokenizer (see `policy_model`)."""
    tokenizer = load_tokenizer(model_dir)
    return policy_model(model_dir, tokenizer), tokenizer


def policy_model(path: str, tokenizer: PreTrainedTokenizerBase) -> torch.nn.Module:
    """A saved model as the policy: trains with TRAINING_ATTENTION, samples with SAMPLING_ATTENTION,
    and stops a completion at eos or `<|end|>`."""
    model = load_causal_lm(path, tokenizer, TRAINING_ATTENTION)
    # TRL stops a completion at every eos id the generation config declares
    model.generation_config.eos_token_id = stop_token_ids(tokenizer)
    sample_with(model, SAMPLING_ATTENTION)
    return model


def sample_with(model: torch.nn.Module, attention: str) -> None:
    """Make `model.generate` run with `attention` and return to the model's own one afterwards (TRL
    samples through model.generate and trains through model.forward, one model for both)."""
    generate = model.generate

    @functools.wraps(generate)
    def generate_with(*args, **kwargs):
        own = model.config._attn_implementation
        model.set_attn_implementation(attention)
        try:
            return generate(*args, **kwargs)
        finally:
            model.set_attn_implementation(own)

    model.generate = generate_with


def prompt_prefix(tokenizer: PreTrainedTokenizerBase) -> str:
    """Text to put before every prompt so that TRL's plain tokenisation starts it with bos, as
    training.model.encode_prompt (and so pretraining) does. Empty when the tokenizer adds bos itself."""
    if tokenizer.bos_token is None:
        return ""
    ids = tokenizer("x")["input_ids"]
    return "" if ids and ids[0] == tokenizer.bos_token_id else tokenizer.bos_token


def prompt_tokens(tokenizer: PreTrainedTokenizerBase, prompt: str) -> int:
    return len(tokenizer(prompt)["input_ids"])


# ------------------------------------------------------------------------------ trainer

def use_bf16(setting) -> bool:
    """A `bf16:` setting (true, false or auto: where the GPU supports it) as a bool."""
    if setting == "auto":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(setting)


def _has_tensorboard() -> bool:
    # transformers refuses report_to=tensorboard without it; a run without curves in TensorBoard still
    # has curves.json
    return any(importlib.util.find_spec(m) is not None for m in ("tensorboard", "tensorboardX"))


def build_grpo_config(section: dict, work_dir: str, has_eval: bool = False):
    """trl.GRPOConfig from the `grpo:` section, whole: OWN_GRPO_KEYS split off, `auto` resolved for bf16
    and optim, and the settings of STAGE_GRPO_KEYS added."""
    from trl import GRPOConfig  # TRL on first use, as in check_grpo_section

    check_grpo_section(section)
    on_gpu = torch.cuda.is_available()
    kwargs = {k: v for k, v in section.items() if k not in OWN_GRPO_KEYS}
    if "bf16" in kwargs:
        kwargs["bf16"] = use_bf16(kwargs["bf16"])
    if kwargs.get("optim") == "auto":
        kwargs["optim"] = "adamw_torch_fused" if on_gpu else "adamw_torch"
    if not has_eval:  # nothing to evaluate: no evaluation at the start either (transformers would refuse)
        kwargs["eval_steps"] = None
        kwargs["eval_on_start"] = False
    logging_dir = str(Path(work_dir) / "tensorboard")
    os.environ["TENSORBOARD_LOGGING_DIR"] = logging_dir  # where transformers 5.x looks for it
    stage = dict(
        output_dir=work_dir,
        report_to=["tensorboard"] if _has_tensorboard() else [],
        save_strategy="steps",
        eval_strategy="steps" if (kwargs.get("eval_steps") and has_eval) else "no",
        dataloader_num_workers=0,  # prompts may be built on the fly from the kernel DB
        dataloader_pin_memory=on_gpu,
        disable_tqdm=False,
    )
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    if "logging_dir" in names:
        stage["logging_dir"] = logging_dir
    if "activation_checkpointing" in names and "gradient_checkpointing" in kwargs:
        # transformers >= 5.2x renamed it; the old name still works, loudly
        stage["activation_checkpointing"] = kwargs["gradient_checkpointing"]
    return GRPOConfig(**kwargs, **stage)


class CurvesCallback(TrainerCallback):
    """Rewrites curves.json from the trainer's log history at every log (the history is restored on
    resume, so the file always covers the whole run)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_log(self, args, state, control, logs=None, **kw):
        if state.is_world_process_zero:
            write_json(self.path, curves_from_history(state.log_history))


CURVE_KEYS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "kernel/parse_rate": "parse_rate",
    "kernel/compile_rate": "compile_rate",
    "kernel/correct_rate": "correct_rate",
    "kernel/faster_rate": "faster_rate",
    "kernel/timeout_rate": "timeout_rate",
    "kernel/speedup_geomean": "speedup_geomean",
    "kernel/speedup_max": "speedup_max",
    "kernel/verbatim_rate": "verbatim_rate",
    "kernel/timed": "timed",
    "kernel/judge_seconds": "judge_seconds",
    # the judge's phases (its compiles, the GPU evaluations' phases, the pool's rest): where a step's judging goes
    **{f"kernel/judge_{phase}_seconds": f"judge_{phase}_seconds" for phase in JUDGE_PHASES + EVAL_PHASES},
    "step_time": "step_seconds",
    "kl": "kl",
    "entropy": "entropy",
    "loss": "loss",
    "learning_rate": "learning_rate",
    "completions/mean_length": "completion_length",
    "completions/clipped_ratio": "clipped_ratio",
    "prompt/context_examples": "context_examples",
    "kernel/parse_rate_in_context": "parse_rate_in_context",
    "kernel/parse_rate_bare": "parse_rate_bare",
    "kernel/correct_rate_in_context": "correct_rate_in_context",
    "kernel/correct_rate_bare": "correct_rate_bare",
}


def curves_from_history(log_history: list[dict]) -> list[dict]:
    """One row per logging step: reward, compile/correct rates, speedup geomean, KL, lengths."""
    rows = []
    for entry in log_history:
        if "reward" not in entry:
            continue
        row = {"step": entry.get("step")}
        row.update({short: entry[k] for k, short in CURVE_KEYS.items() if k in entry and entry[k] is not None})
        rows.append(row)
    return rows


def heldout_curve_from_history(log_history: list[dict]) -> list[dict]:
    """One row per evaluation of the held-out prompts (TRL logs them with an `eval_` prefix): the same
    quantities as curves_from_history, on shapes the policy never trains on."""
    rows = []
    for entry in log_history:
        if "eval_reward" not in entry:
            continue
        row = {"step": entry.get("step")}
        row.update({short: entry[f"eval_{k}"] for k, short in CURVE_KEYS.items()
                    if entry.get(f"eval_{k}") is not None})
        rows.append(row)
    return rows


def compare_phases(curves: list[dict], fraction: float = 0.2) -> dict:
    """Means of each curve over the first and the last `fraction` of logged steps."""
    if not curves:
        return {"steps_logged": 0}
    n = max(1, math.ceil(len(curves) * fraction))
    first, last = curves[:n], curves[-n:]
    out = {"steps_logged": len(curves), "rows_per_phase": n,
           "first_steps": [first[0]["step"], first[-1]["step"]], "last_steps": [last[0]["step"], last[-1]["step"]]}
    for key in ("reward", "parse_rate", "compile_rate", "correct_rate", "faster_rate", "speedup_geomean", "kl"):
        a = [r[key] for r in first if key in r]
        b = [r[key] for r in last if key in r]
        if a or b:
            out[key] = {"first": sum(a) / len(a) if a else None, "last": sum(b) / len(b) if b else None}
    return out


def compare_phases_by_problem(evaluations: list[dict], fraction: float = 0.2) -> dict:
    """First vs last `fraction` of steps, problem by problem, from the kernel database's rows.

    A step's prompts are drawn at random, so in a short run the phase means of the curves mostly
    measure which problems were drawn: in one rl_hgemm run, batched-small went from 0 of 8
    evaluations correct at one step to 24 of 29 at another while the policy barely moved (KL < 0.0005).
    Here each rate is the mean over the problems evaluated in both phases, each weighted equally,
    and the speedup is the geometric mean over problems verified in both (of each phase's best)."""
    steps = sorted({r["step"] for r in evaluations})
    if not steps:
        return {"problems_paired": 0}
    n = max(1, math.ceil(len(steps) * fraction))
    phases = {"first": set(steps[:n]), "last": set(steps[-n:])}
    by: dict[str, dict[str, list[dict]]] = {"first": {}, "last": {}}
    for r in evaluations:
        for name, members in phases.items():
            if r["step"] in members:
                by[name].setdefault(r["problem_key"], []).append(r)
    paired = sorted(set(by["first"]) & set(by["last"]))
    out: dict = {"steps": [steps[0], steps[-1]], "steps_per_phase": n, "problems_paired": len(paired)}
    if not paired:
        return out
    tests = {"parse_rate": lambda s: s != "parse_error",
             "compile_rate": lambda s: s not in ("parse_error", "compile_error"),
             "correct_rate": lambda s: s == "ok"}
    for name, ok in tests.items():
        out[name] = {ph: sum(sum(map(ok, (r["status"] for r in by[ph][k]))) / len(by[ph][k]) for k in paired)
                     / len(paired) for ph in phases}

    def best(rows):
        xs = [r["speedup_vs_best"] for r in rows if r["status"] == "ok" and r["speedup_vs_best"]]
        return max(xs) if xs else None

    both = [(best(by["first"][k]), best(by["last"][k])) for k in paired]
    both = [(a, b) for a, b in both if a and b]
    if both:
        out["best_speedup_geomean"] = {ph: math.exp(sum(math.log(pair[i]) for pair in both) / len(both))
                                       for i, ph in enumerate(phases)}
        out["problems_verified_in_both"] = len(both)
    return out


def train_and_save(model, tokenizer, dataset, grpo: dict, judge, db, reward_cfg, stage: str,
                   work_dir: str, resumable: bool, out: Path, verbatim=None, eval_dataset=None) -> dict:
    """What both RL stages train with: the kernel reward over `judge` (recording into `db`), GRPO with
    curves written to out/curves.json, the policy and tokenizer saved to `out`; judge and reward are
    closed whatever happens; with `verbatim` (the corpus's kernels) a curve of the share of completions
    that recite a corpus document; with `eval_dataset` (rows marked `heldout`) TRL's evaluation every
    grpo.eval_steps steps, judged like training and recorded apart (KernelReward). Returns
    train_grpo's summary without the trainer."""
    reward = KernelReward(judge, db, reward_cfg, stage, verbatim=verbatim, group_size=grpo["num_generations"])
    try:
        summary = train_grpo(model, tokenizer, reward, dataset, grpo, work_dir, resumable,
                             curves_path=out / "curves.json", eval_dataset=eval_dataset)
        trainer = summary.pop("trainer")
        trainer.save_model(str(out))
        tokenizer.save_pretrained(str(out))
    finally:
        reward.close()
        judge.close()
    return summary


def finish_stage(stage: str, out: Path, db, gpu: bool, gpu_scope: str, reward_cfg, summary: dict,
                 wall_start: float, config: dict, **specific) -> dict:
    """What both RL stages end with: the metrics they share around their own (`specific`), and a
    snapshot of the kernel database in the output folder. Returns the metrics (the stage writes them)."""
    curves = json.loads((out / "curves.json").read_text())
    metrics = {
        "stage": stage,
        "reward_scope": gpu_scope if gpu else "parse+compile only: no GPU here, nothing was run, verified or timed",
        "timed": bool(gpu),
        "phases": compare_phases(curves),
        "phases_by_problem": compare_phases_by_problem(db.evaluations(stage)),
        **specific,
        "status_counts": db.status_counts(stage),
        "evaluations": db.count(stage),
        "class_rewards": class_rewards(reward_cfg),
        "train": summary,
        "wall_time_s": time.perf_counter() - wall_start,
        "environment": environment() | {"cuda_available": torch.cuda.is_available()},
        "config": config,
    }
    db.copy_to(out / "kernels.sqlite")
    db.close()
    return metrics


def _check_reference_loadable(model) -> None:
    """With beta > 0 TRL loads the reference model again from the model folder; if load_policy had to
    grow the embeddings for our special tokens, that copy would not match the policy. Say so up front."""
    saved = AutoConfig.from_pretrained(model.config._name_or_path).vocab_size
    if saved != model.get_input_embeddings().num_embeddings:
        raise ValueError(
            f"{model.config._name_or_path} has {saved} embeddings but its tokenizer needs "
            f"{model.get_input_embeddings().num_embeddings}: with grpo.beta > 0 the KL reference would not match. "
            "Start from a stage output (stages.pretrain saves matching model and tokenizer) or set grpo.beta: 0."
        )


def train_grpo(model, tokenizer, reward_func, train_dataset, grpo: dict, work_dir: str,
               resumable: bool, curves_path: str | Path, eval_dataset=None) -> dict:
    """Train (or resume) with TRL's GRPOTrainer, configured by the `grpo:` section; returns a summary.
    The caller saves the model."""
    from trl import GRPOTrainer  # TRL on first use, as in check_grpo_section

    args = build_grpo_config(grpo, work_dir, has_eval=eval_dataset is not None)
    set_seed(args.seed)
    if args.beta > 0:
        _check_reference_loadable(model)
    last = get_last_checkpoint(work_dir) if resumable and Path(work_dir).is_dir() else None
    # A run whose last checkpoint already reached max_steps is not trained again (resuming would take
    # one extra step); its weights come from that checkpoint.
    finished = last is not None and _checkpoint_state(last).global_step >= args.max_steps
    # an evaluation where the time budget stops training, so that the last policy is on the held-out curve
    clock = TrainClock(grpo["max_train_seconds"], evaluate_on_stop=args.eval_strategy != "no")
    if finished:
        print(f"{last} already reached max_steps ({args.max_steps}): its weights are used, nothing is trained",
              flush=True)
        model = policy_model(last, tokenizer)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward_func],
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        callbacks=[clock, CurvesCallback(curves_path)],
    )
    if finished:
        trainer.state = _checkpoint_state(last)
    else:
        trainer.train(resume_from_checkpoint=last)
    write_json(curves_path, curves_from_history(trainer.state.log_history))
    return {
        **({"heldout_curve": heldout_curve_from_history(trainer.state.log_history)} if eval_dataset is not None else {}),
        "trainer": trainer,
        "global_step": trainer.state.global_step,
        "resumed_from": last,
        "steps_this_run": clock.steps,
        "step_seconds": clock.step_seconds,
        "stopped_by_time_budget": clock.stopped_by_budget,
        "bf16": args.bf16,
        "generation_batch_size": args.generation_batch_size,
        "gradient_checkpointing": args.gradient_checkpointing,
        "attention": {"train": TRAINING_ATTENTION, "sample": SAMPLING_ATTENTION},
        # the most the policy's process held on the GPU at once, sampling and training together
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
    }

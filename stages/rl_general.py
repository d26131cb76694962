"""Stage 2: GRPO on the general CUDA kernel task suite (kernels_corpus/tasks), rewarded by verdicts.

    python -m stages.rl_general --config configs/sections/rl_general.yaml --model results/pretrain \
        --work work/rl_general --out results/rl_general

Each prompt is one task at a few of its sizes (task.prompt(sizes), framed like an HGEMM prompt), with
the task's seed solution shown as a correct kernel to improve on (tasks.show_reference). A completion
is judged on exactly those sizes (hgemm.judge, TaskProblem): compile, verify against the float64
reference, time against the torch baseline. The reward is the clipped log of the geometric-
mean speedup over torch, or a negative reward by failure class (training/rewards.py). On a machine
without a GPU the reward covers parse and compile only, and metrics.json says so. Before and after
training, the same probe.prompts task prompts are sampled probe.k times and judged (training/probe.py):
metrics.json's `probe` compares the starting model with the trained one on identical prompts.

Writes to --out: the trained model and tokenizer, kernels.sqlite (every evaluated candidate),
curves.json (per logging step), and metrics.json last (first vs last 20% of steps, best speedup per task).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stages.common import build_dataclass, load_stage_config, prepare_work_dir, publish, resume_key, staging_dir

STAGE = "rl_general"


@dataclass
class TaskSettings:
    """The `tasks:` section: which tasks and sizes become prompts."""

    names: list[str] | str = "all"  # "all" or a list of task names
    exclude: list[str] = field(default_factory=list)  # never trained on
    size_indices: list[int] = field(default_factory=lambda: [1, 2])  # into task.sizes; judged on all of them
    repeats: int = 4  # each task appears this many times per pass over the dataset
    # Show the task's seed solution (kernels_corpus/tasks/solutions) in the prompt, as CUDA-L1 shows its
    # reference code: session 4's model, prompted without it, wrote HGEMM launch specs for row tasks
    # and got 0 of 386 completions correct, so GRPO had no speed to rank.
    show_reference: bool = True


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m stages.{STAGE}", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True,
                   help="YAML with tasks/judge/reward/grpo sections, or an experiment config with an 'rl_general' section")
    p.add_argument("--model", required=True, help="model folder to start from (stages.pretrain's --out: model + tokenizer)")
    p.add_argument("--work", required=True,
                   help="resumable state (checkpoints, TensorBoard logs, the kernel DB while training): an unfinished "
                        "run with the same settings and inputs resumes; other state is moved aside to <work>.previous")
    p.add_argument("--out", required=True,
                   help="output folder: model + tokenizer, kernels.sqlite, curves.json, metrics.json (last)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set grpo.max_steps=5 (repeatable; value parsed as YAML)")
    return p


def task_problems(settings: TaskSettings):
    """[(task, [TaskProblem per chosen size])] for the training tasks, in suite order."""
    from hgemm.problem import TaskProblem
    from kernels_corpus.tasks import get_task, load_tasks

    tasks = load_tasks() if settings.names == "all" else [get_task(n) for n in settings.names]
    unknown = set(settings.exclude) - {t.name for t in load_tasks()}
    if unknown:
        raise ValueError(f"rl_general.tasks.exclude: unknown task(s) {sorted(unknown)}")
    out = []
    for task in tasks:
        if task.name in settings.exclude:
            continue
        idx = sorted({i % len(task.sizes) for i in settings.size_indices})
        out.append((task, [TaskProblem.of(task.name, task.sizes[i]) for i in idx]))
    if not out:
        raise ValueError("rl_general.tasks selects no task")
    return out


def task_prompt(task, problems, prefix: str, reference: str | None = None) -> str:
    from training.prompts import CANDIDATE_TOKEN, PROBLEM_TOKEN, reference_block

    # The HGEMM framing, so the completion convention (candidate, then <|end|>) carries over.
    body = task.prompt([p.variables() for p in problems])
    if reference:
        body += "\n" + reference_block(reference)
    return f"{prefix}{PROBLEM_TOKEN}\n{body}\n{CANDIDATE_TOKEN}\n"


def build_dataset(pairs, tokenizer, max_prompt_length: int, repeats: int, show_reference: bool = False):
    """One row per task (then repeated): its prompt, with its seed solution where asked for and where it
    fits max_prompt_length (else without). Returns (dataset, tasks skipped as too long even bare,
    tasks whose reference did not fit)."""
    from datasets import Dataset

    from training.grpo import prompt_prefix, prompt_tokens
    from training.rewards import problems_to_json

    prefix = prompt_prefix(tokenizer)
    rows, skipped, no_reference = [], [], []
    for task, problems in pairs:
        prompt = task_prompt(task, problems, prefix)
        if prompt_tokens(tokenizer, prompt) > max_prompt_length:
            skipped.append(task.name)
            continue
        if show_reference and task.solution:
            with_ref = task_prompt(task, problems, prefix, task.solution)
            if prompt_tokens(tokenizer, with_ref) <= max_prompt_length:
                prompt = with_ref
            else:
                no_reference.append(task.name)
        rows.append({"prompt": prompt, "problems": problems_to_json(problems), "problem_key": problems[0].key,
                     "shape_class": "task", "task": task.name})
    if not rows:
        raise ValueError(f"every task prompt is longer than grpo.max_prompt_length={max_prompt_length}")
    return Dataset.from_list(rows * max(1, repeats)), skipped, no_reference


def best_per_task(db, pairs) -> dict[str, dict]:
    """Per task: the best verified geometric-mean speedup over torch and the kernel's sha."""
    best = db.best_per_key(STAGE)
    out = {}
    for task, problems in pairs:
        rows = [best[p.key] for p in problems if p.key in best]
        entry = {"sizes_verified": len(rows), "sizes": len(problems)}
        if rows:
            entry["best_speedup_vs_torch"] = max(r["speedup_vs_best"] for r in rows)
            entry["geomean_of_best_per_size"] = math.exp(sum(math.log(r["speedup_vs_best"]) for r in rows) / len(rows))
            entry["sha"] = max(rows, key=lambda r: r["speedup_vs_best"])["sha"]
        out[task.name] = entry
    return out


def run(config: dict, model_dir: str, work_dir: str, out_dir: str) -> dict:

    from training.grpo import GRPOSettings, JudgeSettings, finish_stage, load_policy, resume_settings, train_and_save
    from training.kerneldb import KernelDB
    from training.probe import ProbeSettings, probe_model, probe_summary, spread
    from training.rewards import RewardSettings

    wall_start = time.perf_counter()
    unknown = sorted(set(config) - {"tasks", "judge", "reward", "grpo", "probe"})
    if unknown:
        raise ValueError(f"rl_general config: unknown section(s) {unknown}; known: tasks, judge, reward, grpo, probe")
    tasks_cfg = build_dataclass(TaskSettings, config.get("tasks") or {}, "rl_general.tasks")
    judge_cfg = build_dataclass(JudgeSettings, config.get("judge") or {}, "rl_general.judge")
    reward_cfg = build_dataclass(RewardSettings, config.get("reward") or {}, "rl_general.reward")
    grpo_cfg = build_dataclass(GRPOSettings, config.get("grpo") or {}, "rl_general.grpo")
    probe_cfg = build_dataclass(ProbeSettings, config.get("probe") or {}, "rl_general.probe")
    pairs = task_problems(tasks_cfg)

    settings = resume_settings(grpo_cfg, tasks=asdict(tasks_cfg), reward=asdict(reward_cfg))
    resumable = prepare_work_dir(work_dir, resume_key(settings, {"model": model_dir}))
    out = staging_dir(out_dir)  # swapped in for out_dir at the end: a failed run leaves the old outputs whole
    model, tokenizer = load_policy(model_dir)
    dataset, skipped, no_reference = build_dataset(pairs, tokenizer, grpo_cfg.max_prompt_length, tasks_cfg.repeats,
                                                   tasks_cfg.show_reference)

    # The DB lives in the work folder while training (it grows across resumes) and is copied out at the end.
    db = KernelDB(Path(work_dir) / "kernels.sqlite")
    # The same task prompts before and after training: one dataset row per task (rows repeat after that).
    probe_rows = spread(dataset.select(range(len(pairs) - len(skipped))).to_list(), probe_cfg.prompts)

    def probe(model_path: str) -> dict | None:
        return probe_model(model_path, probe_rows, judge_cfg.make_judge, probe_cfg,
                           grpo_cfg.max_completion_length) if probe_rows else None

    before = probe(model_dir)
    judge = judge_cfg.make_judge()
    summary = train_and_save(model, tokenizer, dataset, grpo_cfg, judge, db, reward_cfg, STAGE, work_dir,
                             resumable, out)
    after = probe(str(out))
    if after:
        after["model"] = str(out_dir)  # where the trained model is published

    metrics = finish_stage(
        STAGE, out, db, judge.gpu, "parse+compile+verify+time (GPU)", reward_cfg, summary, wall_start, config,
        best_per_task=best_per_task(db, pairs),
        probe=probe_summary(before, after),
        tasks={"trained": [t.name for t, _ in pairs if t.name not in skipped], "skipped_too_long": skipped,
               "excluded": tasks_cfg.exclude, "prompts": len(dataset),
               "reference_shown": tasks_cfg.show_reference, "reference_too_long": no_reference},
    )
    publish(out, out_dir, work_dir)
    return metrics


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    config = load_stage_config(args.config, STAGE, args.set)
    metrics = run(config, args.model, args.work, args.out)
    print(json.dumps({k: metrics[k] for k in ("reward_scope", "phases", "status_counts", "wall_time_s")}, indent=2))


if __name__ == "__main__":
    main()

"""GRPO on the general CUDA kernel task suite (kernels_corpus/tasks), rewarded by verdicts.

Each prompt is one task at a few of its sizes (task.prompt(sizes), framed like an HGEMM prompt), with
the task's seed solution shown as a correct kernel to improve on (tasks.show_reference). A completion
is judged on exactly those sizes (hgemm.judge, TaskProblem): compile, verify against the float64
reference, time against the torch baseline. The reward is the clipped log of the geometric-mean
speedup over torch, or a negative reward by failure class (training/rewards.py). On a machine without
a GPU the reward covers parse and compile only, and the metrics say so. Before and after training, the
same probe.prompts task prompts are sampled probe.k times and judged (training/probe.py): the metrics'
`probe` compares the starting model with the trained one on identical prompts.

Outputs: the trained model and tokenizer, kernels.sqlite (every evaluated candidate), curves.json
(per logging step); `run` returns the metrics (first vs last 20% of steps, best speedup per task).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from datasets import Dataset

from hgemm.problem import TaskProblem
from kernels_corpus.tasks import get_task, load_tasks
from kernels_corpus.verbatim import CorpusKernels
from training.grpo import (
    JudgeSettings,
    check_grpo_section,
    finish_stage,
    grpo_resume_settings,
    load_policy,
    prompt_prefix,
    prompt_tokens,
    train_and_save,
)
from training.kerneldb import KernelDB
from training.probe import ProbeSettings, probe_model, probe_summary, spread
from training.prompts import CANDIDATE_TOKEN, PROBLEM_TOKEN, reference_block
from training.rewards import RewardSettings, problems_to_json

STAGE = "rl_general"


@dataclass
class TaskSettings:
    """rl_general's `tasks:` section (values: configs/default.yaml): which tasks and sizes become prompts."""

    names: list[str] | str  # "all" or a list of task names
    exclude: list[str]  # never trained on
    size_indices: list[int]  # into task.sizes; judged on all of them
    repeats: int  # each task appears this many times per pass over the dataset
    # Show the task's seed solution (kernels_corpus/tasks/solutions) in the prompt, as CUDA-L1 shows its
    # reference code: a model prompted without it wrote HGEMM launch specs for row tasks and got no
    # completion correct, so GRPO had no speed to rank.
    show_reference: bool


@dataclass
class RLGeneralSettings:
    """The `rl_general:` section."""

    tasks: TaskSettings
    judge: JudgeSettings
    reward: RewardSettings
    grpo: dict  # trl.GRPOConfig's settings, handed to it whole, and ours (training.grpo.OWN_GRPO_KEYS)
    probe: ProbeSettings

    def __post_init__(self):
        check_grpo_section(self.grpo)


def task_problems(settings: TaskSettings):
    """[(task, [TaskProblem per chosen size])] for the training tasks, in suite order."""
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
    # The HGEMM framing, so the completion convention (candidate, then <|end|>) carries over.
    body = task.prompt([p.variables() for p in problems])
    if reference:
        body += "\n" + reference_block(reference)
    return f"{prefix}{PROBLEM_TOKEN}\n{body}\n{CANDIDATE_TOKEN}\n"


def build_dataset(pairs, tokenizer, max_prompt_length: int, repeats: int, show_reference: bool):
    """One row per task (then repeated): its prompt, with its seed solution where asked for and where it
    fits max_prompt_length (else without). Returns (dataset, tasks skipped as too long even bare,
    tasks whose reference did not fit)."""
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


class GeneralRL:
    """One rl_general run (stages.common.TrainingJob). Built from the settings, it resolves the tasks (a
    bad task name fails before any state is touched); `run` probes, trains and returns the metrics."""

    def __init__(self, settings: RLGeneralSettings, model_dir: str, work_dir: str, out_dir: str,
                 corpus_dir: str | None = None):
        self.settings, self.model_dir, self.work_dir, self.out_dir = settings, model_dir, work_dir, out_dir
        self.corpus_dir = corpus_dir  # for the verbatim-recitation curve; None: no such curve
        self.wall_start = time.perf_counter()
        self.pairs = task_problems(settings.tasks)
        self.resume_settings = {"grpo": grpo_resume_settings(settings.grpo), "tasks": asdict(settings.tasks),
                                "reward": asdict(settings.reward)}
        self.resume_inputs = {"model": model_dir}

    def run(self, out: Path, resumable: bool) -> dict:
        s, pairs = self.settings, self.pairs
        model, tokenizer = load_policy(self.model_dir)
        dataset, skipped, no_reference = build_dataset(pairs, tokenizer, s.grpo["max_prompt_length"],
                                                       s.tasks.repeats, s.tasks.show_reference)

        # The DB lives in the work folder while training (it grows across resumes) and is copied out at the end.
        db = KernelDB(Path(self.work_dir) / "kernels.sqlite")
        # The same task prompts before and after training: one dataset row per task (rows repeat after that).
        probe_rows = spread(dataset.select(range(len(pairs) - len(skipped))).to_list(), s.probe.prompts)

        def probe(model_path: str) -> dict | None:
            return probe_model(model_path, probe_rows, s.judge.make_judge, s.probe,
                               s.grpo["max_completion_length"]) if probe_rows else None

        before = probe(self.model_dir)
        judge = s.judge.make_judge()
        verbatim = CorpusKernels.from_dataset(self.corpus_dir) if self.corpus_dir else None
        summary = train_and_save(model, tokenizer, dataset, s.grpo, judge, db, s.reward, STAGE, self.work_dir,
                                 resumable, out, verbatim=verbatim)
        after = probe(str(out))
        if after:
            after["model"] = str(self.out_dir)  # where the trained model is published

        return finish_stage(
            STAGE, out, db, judge.gpu, "parse+compile+verify+time (GPU)", s.reward, summary, self.wall_start,
            asdict(s),
            best_per_task=best_per_task(db, pairs),
            probe=probe_summary(before, after),
            tasks={"trained": [t.name for t, _ in pairs if t.name not in skipped], "skipped_too_long": skipped,
                   "excluded": s.tasks.exclude, "prompts": len(dataset),
                   "reference_shown": s.tasks.show_reference, "reference_too_long": no_reference},
        )

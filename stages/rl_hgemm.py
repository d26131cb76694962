"""Stage 3: HGEMM-specialised GRPO over the size/batch grid, with a held-out set and contrastive prompts.

    python -m stages.rl_hgemm --config configs/sections/rl_hgemm.yaml --model results/rl_general \\
        --library results/tune --work work/rl_hgemm --out results/rl_hgemm

Shapes. The grid (a grid YAML path or an inline grid) is split into held-out shapes (listed in the
config, plus a deterministic hash-based fraction) and training shapes. Held-out shapes are written to
--out/heldout.json and are never prompted, judged or shown as context here. Training shapes are
grouped into buckets by shape class, layout and size (log2 of the cube root of M*N*K*batch).

Prompts. One training shape per prompt, with contrastive context as in CUDA-L1: the best kernel and a
few weaker ones for the nearest shapes, from the kernel database (this run's verified kernels) and the
seed library in --library (its tuned winners and the reference kernels the tune timed), each shown
with its measured speedup over the strongest baseline. Only kernels that fit the prompt are chosen
among, so in practice the library contributes its reference kernels. The
context is rebuilt whenever a prompt is drawn, so it improves as training finds faster kernels; it is
trimmed (weakest first) to fit grpo.max_prompt_length.

Reward. A completion is judged on its shape and up to two more of its bucket: a verified kernel earns
the clipped log of the geometric-mean speedup over the strongest baseline; failures are negative by
class; a speedup above reward.recheck_above is re-judged on fresh inputs and the lower kept
(training/rewards.py).

Probe. After training, the starting model and the trained one each sample probe.k completions for the
same probe.prompts fixed training shapes, judged: metrics.json's `probe` compares the two problem by
problem on bare prompts, and `probe_context` on the same problems with the contrastive context of the
final database (training/probe.py). The curves' first and last steps saw different, randomly drawn
prompts; the probe compares like with like.

Writes to --out: model + tokenizer, kernels.sqlite, best_kernels/ (best verified kernel per training
shape, <problem_key>.cu, and index.json), curves.json, heldout.json, metrics.json (last).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hgemm.problem import Problem, load_grid
from stages.common import (
    build_dataclass,
    load_stage_config,
    prepare_work_dir,
    publish,
    resume_key,
    staging_dir,
    write_json,
)

STAGE = "rl_hgemm"


@dataclass
class ShapeSettings:
    """The `shapes:` section: the grid, the hold-out rule and the bucketing."""

    grid: str | dict = "configs/grids/default.yaml"  # a grid YAML path, or an inline {groups: [...]}
    heldout_keys: list[str] = field(default_factory=list)  # problem keys always held out
    heldout_fraction: float = 0.2  # plus this share of the grid, chosen by a hash of the key
    heldout_salt: str = "rl_hgemm-heldout-v1"  # change it to draw a different held-out set
    classes: list[str] | None = None  # train only these shape classes (null: all)
    max_gflop: float | None = None  # skip training shapes above this many GFLOP (keeps steps short)
    shapes_per_reward: int = 3  # the prompt's shape plus bucket mates it is also judged on
    repeats: int = 4  # each training shape appears this many times per pass over the dataset


@dataclass
class ContextSettings:
    """The `context:` section: the contrastive examples in each prompt."""

    examples: int = 3  # the best kernel plus examples - 1 weaker ones
    nearby_shapes: int = 4  # how many nearest shapes to take kernels from
    use_library: bool = True
    prompt_arch: str = "sm_90a"
    # The share of drawn training prompts that get context (the rest go bare), so that one run shows
    # both kinds: curves `correct_rate_in_context` and `correct_rate_bare`. 1.0 is CUDA-L1's setup.
    share: float = 1.0
    seed: int = 0  # for the share draw


# ------------------------------------------------------------------------------ shapes

def is_heldout(problem: Problem, s: ShapeSettings) -> bool:
    """Deterministic: the same key, salt and fraction always give the same answer, on any machine."""
    if problem.key in s.heldout_keys:
        return True
    h = int.from_bytes(hashlib.sha256(f"{s.heldout_salt}:{problem.key}".encode()).digest()[:8], "big")
    return h / 2**64 < s.heldout_fraction


def bucket_of(problem: Problem) -> str:
    size = round(math.log2((problem.M * problem.N * problem.K * problem.batch) ** (1 / 3)))
    return f"{problem.shape_class}/{problem.layout}/s{size}"


def split_grid(s: ShapeSettings, root: Path = Path(".")) -> tuple[list[Problem], list[Problem]]:
    """(training shapes, held-out shapes). Held-out is decided over the whole grid, before the class
    and size filters, so it does not move when those change."""
    grid = s.grid if isinstance(s.grid, dict) else root / s.grid
    problems = load_grid(grid)
    unknown = set(s.heldout_keys) - {p.key for p in problems}
    if unknown:
        raise ValueError(f"rl_hgemm.shapes.heldout_keys: not in the grid: {sorted(unknown)}")
    heldout = [p for p in problems if is_heldout(p, s)]
    train = [p for p in problems if not is_heldout(p, s)
             and (s.classes is None or p.shape_class in s.classes)
             and (s.max_gflop is None or p.flops / 1e9 <= s.max_gflop)]
    if not train:
        raise ValueError("rl_hgemm.shapes leaves no training shape (hold-out, classes and max_gflop took them all)")
    return train, heldout


def buckets(train: list[Problem]) -> dict[str, list[Problem]]:
    out: dict[str, list[Problem]] = {}
    for p in train:
        out.setdefault(bucket_of(p), []).append(p)
    return out


def reward_shapes(problem: Problem, bucket: list[Problem], n: int) -> list[Problem]:
    """The prompt's shape first, then its nearest bucket mates: a kernel is rewarded for being fast
    across its bucket, not on one shape."""
    from training.kerneldb import shape_distance

    mates = sorted((p for p in bucket if p != problem), key=lambda p: (shape_distance(problem, p.key), p.key))
    return [problem] + mates[: max(0, n - 1)]


# ------------------------------------------------------------------------------ contrastive context

def load_library(folder: str | Path | None) -> dict[str, list[tuple[str, float]]]:
    """problem_key -> [(kernel text, speedup_vs_best), ...], fastest first: the tuned winner and the
    reference kernels the tune timed on that shape (table.json `references`), from a seed library folder
    (table.json + kernels/<name>.cu). Missing folder, table or kernel files: those entries are simply
    absent. The references matter for context: a winner runs to 5-12k tokens and never fits a prompt."""
    if not folder:
        return {}
    folder = Path(folder)
    table_path = folder / "table.json"
    if not table_path.is_file():
        return {}
    table = json.loads(table_path.read_text())
    out = {}
    for key, entry in (table.get("entries") or {}).items():
        measured = {entry.get("kernel"): entry.get("speedup_vs_best")} | (entry.get("references") or {})
        kernels = []
        for name, speedup in measured.items():
            path = folder / "kernels" / f"{name}.cu"
            if path.is_file() and isinstance(speedup, (int, float)) and speedup > 0:
                kernels.append((path.read_text(), float(speedup)))
        if kernels:
            out[key] = sorted(kernels, key=lambda ts: -ts[1])
    return out


# Tokens a context example costs beyond its own text: its header line (speedup) and separators.
CONTEXT_SLACK_TOKENS = 32


class ContrastivePrompts:
    """Builds each prompt when it is drawn: the problem plus the best and some weaker kernels for
    nearby shapes. Used as a datasets transform, so the DB's newest kernels reach the next prompts."""

    def __init__(self, db, library: dict[str, list[tuple[str, float]]], heldout: set[str], settings: ContextSettings,
                 tokenizer, max_prompt_length: int):
        from training.grpo import prompt_prefix

        self.db = db
        self.library = {k: v for k, v in library.items() if k not in heldout}  # held-out shapes stay unseen
        self.heldout = heldout
        self.s = settings
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.prefix = prompt_prefix(tokenizer)
        self._tokens: dict[str, int] = {}  # kernel text -> token count, so each text is tokenised once
        self._share_draw = random.Random(settings.seed)

    def _fits(self, text: str, budget: int) -> bool:
        if text not in self._tokens:
            from training.grpo import prompt_tokens

            self._tokens[text] = prompt_tokens(self.tokenizer, text)
        return self._tokens[text] + CONTEXT_SLACK_TOKENS <= budget

    def examples(self, problem: Problem, budget: int | None = None) -> list[tuple[str, float]]:
        """(text, speedup) pairs, weakest first, best last (closest to where the answer starts). With a
        token budget, only kernels that fit it on their own are candidates, so the contrast is chosen
        among what can be shown: a tuned seed kernel runs to ~6k tokens and would never fit a 1k prompt,
        leaving no context at all."""
        from training.kerneldb import shape_distance

        pool: dict[str, tuple[str, float]] = {}  # text -> (text, speedup); the best measurement per text

        def add(text: str, speedup: float) -> None:
            if budget is not None and not self._fits(text, budget):
                return
            if text not in pool or speedup > pool[text][1]:
                pool[text] = (text, speedup)

        for row in self.db.nearby(problem, self.s.nearby_shapes, exclude=self.heldout):
            add(row["text"], row["speedup_vs_best"])
        if problem.key not in self.heldout:  # a held-out shape's own records are never shown
            for row in self.db.top_k(problem.key, self.s.examples):
                add(row["text"], row["speedup_vs_best"])
        if self.s.use_library and self.library:
            near = sorted((d, k) for k in self.library if (d := shape_distance(problem, k)) is not None)
            for _, key in near[: self.s.nearby_shapes]:
                for text, speedup in self.library[key]:
                    add(text, speedup)
        ranked = sorted(pool.values(), key=lambda ts: -ts[1])
        if not ranked or self.s.examples < 1:
            return []
        rest = ranked[1:]
        want = min(len(rest), self.s.examples - 1)
        # weaker examples spread over the rest, so the contrast spans good to poor
        picks = [rest[round(i * (len(rest) - 1) / max(1, want - 1))] for i in range(want)] if want else []
        chosen = list(dict.fromkeys([ranked[0], *picks]))
        return sorted(chosen, key=lambda ts: ts[1])

    def bare(self, problem: Problem) -> str:
        """The prompt without context."""
        from training.prompts import format_problem_prompt

        return self.prefix + format_problem_prompt(problem, arch=self.s.prompt_arch)

    def prompt(self, problem: Problem) -> tuple[str, int]:
        """The prompt text and how many context examples it kept."""
        from training.grpo import prompt_tokens
        from training.prompts import format_problem_prompt

        bare = prompt_tokens(self.tokenizer, self.bare(problem))
        context = self.examples(problem, budget=self.max_prompt_length - bare)
        while True:
            text = self.prefix + format_problem_prompt(problem, context=context or None, arch=self.s.prompt_arch)
            if prompt_tokens(self.tokenizer, text) <= self.max_prompt_length or not context:
                return text, len(context)
            context = context[1:]  # drop the weakest first

    def __call__(self, batch: dict) -> dict:
        from training.rewards import problems_from_json

        batch = dict(batch)
        prompts, kept = [], []
        for problems in batch["problems"]:
            problem = problems_from_json(problems)[0]
            if self._share_draw.random() < self.s.share:
                text, n = self.prompt(problem)
            else:
                text, n = self.bare(problem), 0
            prompts.append(text)
            kept.append(n)
        batch["prompt"] = prompts
        batch["context_examples"] = kept
        return batch


def probe_problems(train: list[Problem], n: int) -> list[Problem]:
    """The probe's fixed problems: n spread over the training shapes, bucket by bucket."""
    from training.probe import spread

    return spread(sorted(train, key=lambda p: (bucket_of(p), p.key)), n)


def probe_row(problem: Problem, prompt: str) -> dict:
    """A probe row (training.probe.probe_model): the prompt, judged on the problem's own shape."""
    from training.rewards import problems_to_json

    return {"prompt": prompt, "problems": problems_to_json([problem]), "problem_key": problem.key}


def build_dataset(train: list[Problem], shape_settings: ShapeSettings):
    from datasets import Dataset

    from training.rewards import problems_to_json

    groups = buckets(train)
    rows = []
    for p in train:
        shapes = reward_shapes(p, groups[bucket_of(p)], shape_settings.shapes_per_reward)
        rows.append({"problems": problems_to_json(shapes), "problem_key": p.key, "shape_class": p.shape_class,
                     "bucket": bucket_of(p)})
    return Dataset.from_list(rows * max(1, shape_settings.repeats))


# ------------------------------------------------------------------------------ outputs

def write_best_kernels(db, train: list[Problem], library: dict, folder: Path) -> dict:
    """best_kernels/<key>.cu for every training shape with a verified kernel, index.json with speedups
    and the library's speedup on the same shape; returns the summary for metrics.json."""
    folder.mkdir(parents=True, exist_ok=True)
    best = db.best_per_key(STAGE)
    index, beats, compared = {}, 0, 0
    for p in train:
        row = best.get(p.key)
        if not row:
            continue
        (folder / f"{p.key}.cu").write_text(row["text"])
        lib = library[p.key][0][1] if p.key in library else None  # the library's fastest on this shape
        entry = {"sha": row["sha"], "speedup_vs_best": row["speedup_vs_best"],
                 "speedup_vs_cublas": row["speedup_vs_cublas"], "time_us": row["time_us"],
                 "library_speedup_vs_best": lib}
        if lib:
            compared += 1
            beats += row["speedup_vs_best"] > lib
        index[p.key] = entry
    write_json(folder / "index.json", index)
    speedups = [e["speedup_vs_best"] for e in index.values()]
    return {
        "training_shapes": len(train),
        "shapes_with_verified_kernel": len(index),
        "geomean_best_speedup": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "shapes_compared_with_library": compared,
        "share_beating_library": beats / compared if compared else None,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m stages.{STAGE}", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True,
                   help="YAML with shapes/context/judge/reward/grpo sections, or an experiment config with an 'rl_hgemm' section")
    p.add_argument("--model", required=True, help="model folder to start from (stages.rl_general's --out)")
    p.add_argument("--library", default=None,
                   help="seed library folder (table.json + kernels/<name>.cu) for contrastive context; may be missing or empty")
    p.add_argument("--work", required=True,
                   help="resumable state (checkpoints, TensorBoard logs, the kernel DB while training): an unfinished "
                        "run with the same settings and inputs resumes; other state is moved aside to <work>.previous")
    p.add_argument("--out", required=True,
                   help="output folder: model + tokenizer, kernels.sqlite, best_kernels/, curves.json, heldout.json, metrics.json (last)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set grpo.max_steps=5 (repeatable; value parsed as YAML)")
    return p


def run(config: dict, model_dir: str, library_dir: str | None, work_dir: str, out_dir: str) -> dict:

    from training.grpo import GRPOSettings, JudgeSettings, finish_stage, load_policy, resume_settings, train_and_save
    from training.kerneldb import KernelDB
    from training.probe import ProbeSettings, probe_model_sets, probe_summary
    from training.rewards import RewardSettings

    wall_start = time.perf_counter()
    sections = {"shapes", "context", "judge", "reward", "grpo", "probe"}
    unknown = sorted(set(config) - sections)
    if unknown:
        raise ValueError(f"rl_hgemm config: unknown section(s) {unknown}; known: {sorted(sections)}")
    shape_cfg = build_dataclass(ShapeSettings, config.get("shapes") or {}, "rl_hgemm.shapes")
    context_cfg = build_dataclass(ContextSettings, config.get("context") or {}, "rl_hgemm.context")
    judge_cfg = build_dataclass(JudgeSettings, config.get("judge") or {}, "rl_hgemm.judge")
    reward_cfg = build_dataclass(RewardSettings, config.get("reward") or {}, "rl_hgemm.reward")
    grpo_cfg = build_dataclass(GRPOSettings, config.get("grpo") or {}, "rl_hgemm.grpo")
    probe_cfg = build_dataclass(ProbeSettings, config.get("probe") or {}, "rl_hgemm.probe")

    train, heldout = split_grid(shape_cfg)
    heldout_keys = {p.key for p in heldout}
    assert not heldout_keys & {p.key for p in train}
    settings = resume_settings(grpo_cfg, shapes=asdict(shape_cfg), context=asdict(context_cfg),
                               reward=asdict(reward_cfg))
    grid = shape_cfg.grid if isinstance(shape_cfg.grid, str) else None  # an inline grid is in the settings
    resumable = prepare_work_dir(work_dir, resume_key(settings, {"model": model_dir, "library": library_dir,
                                                                 "grid": grid}))
    out = staging_dir(out_dir)  # swapped in for out_dir at the end: a failed run leaves the old outputs whole
    write_json(out / "heldout.json", {
        "rule": {"keys": shape_cfg.heldout_keys, "fraction": shape_cfg.heldout_fraction, "salt": shape_cfg.heldout_salt},
        "heldout": [p.to_dict() | {"key": p.key} for p in heldout],
        "train": [p.to_dict() | {"key": p.key, "bucket": bucket_of(p)} for p in train],
    })
    model, tokenizer = load_policy(model_dir)
    library = load_library(library_dir)
    db = KernelDB(Path(work_dir) / "kernels.sqlite")
    prompts = ContrastivePrompts(db, library, heldout_keys, context_cfg, tokenizer, grpo_cfg.max_prompt_length)
    dataset = build_dataset(train, shape_cfg).with_transform(prompts)

    judge = judge_cfg.make_judge()
    summary = train_and_save(model, tokenizer, dataset, grpo_cfg, judge, db, reward_cfg, STAGE, work_dir,
                             resumable, out)

    # The probe runs after training, the starting model (still on disk) and the trained one on the same
    # prompts: each probe problem bare, and again with the contrastive context the final database gives
    # it, the kind of prompt training saw once the database had kernels. Session 5's model did well on
    # bare prompts and wrote word salad on those. Each probe problem is judged on its own shape.
    probed = probe_problems(train, probe_cfg.prompts)
    bare_rows = [probe_row(p, prompts.bare(p)) for p in probed]
    in_context = {p.key: prompts.prompt(p) for p in (probed if probe_cfg.context else [])}
    context_rows = [probe_row(p, in_context[p.key][0]) for p in probed if p.key in in_context and in_context[p.key][1]]

    # Each model is loaded, sampled and judged once for both sets of prompts (probe_model_sets).
    sets = {name: rows for name, rows in (("bare", bare_rows), ("context", context_rows)) if rows}
    runs = [probe_model_sets(path, sets, judge_cfg.make_judge, probe_cfg, grpo_cfg.max_completion_length)
            for path in (model_dir, str(out))] if sets else []
    for result in (runs[1].values() if runs else []):
        result["model"] = str(out_dir)  # where the trained model is published

    def probe(name: str) -> dict:
        if name not in sets:
            return {"prompts": 0, "note": "probe.prompts is 0" if not probed else
                    "probe.context is off" if not probe_cfg.context else "no probe problem had context examples"}
        return probe_summary(runs[0][name], runs[1][name])

    trained_on = db.problem_keys(STAGE)
    leaked = sorted(trained_on & heldout_keys)
    if leaked:  # cannot happen by construction; checked because a leak would void the held-out table
        raise RuntimeError(f"held-out shapes were judged during training: {leaked[:5]}")
    best = write_best_kernels(db, train, library, out / "best_kernels")
    sample_prompt, kept = prompts.prompt(train[0])
    metrics = finish_stage(
        STAGE, out, db, judge.gpu, "parse+compile+verify+time vs the strongest baseline (GPU)", reward_cfg, summary,
        wall_start, config,
        best_kernels=best,
        probe=probe("bare"),
        probe_context=probe("context") | {"context_examples": {k: kept for k, (_, kept) in in_context.items()}},
        shapes={"train": len(train), "heldout": len(heldout), "buckets": len(buckets(train)),
                "shapes_judged": len(trained_on)},
        context={"library_entries": len(library), "library_dir": library_dir, "example_prompt_context_kept": kept,
                 "example_prompt_tokens": len(tokenizer(sample_prompt)["input_ids"])},
    )
    publish(out, out_dir, work_dir)
    return metrics


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    config = load_stage_config(args.config, STAGE, args.set)
    metrics = run(config, args.model, args.library, args.work, args.out)
    print(json.dumps({k: metrics[k] for k in ("reward_scope", "phases", "best_kernels", "status_counts", "wall_time_s")},
                     indent=2))


if __name__ == "__main__":
    main()

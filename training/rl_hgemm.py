"""HGEMM-specialised GRPO over the size/batch grid, with a held-out set and contrastive prompts.

Shapes (training/heldout.py). The grid is split into held-out shapes and training shapes; held-out
shapes go to heldout.json and are never trained on or shown as context. With shapes.heldout_eval, some
of them are prompted and judged by TRL's evaluation every grpo.eval_steps steps (the held-out curve,
metrics `heldout_curve`), recorded in the kernel database under `rl_hgemm_heldout`, apart from
training. Training shapes are grouped into buckets by shape class, layout and size.

Prompts (training/context.py). One training shape per prompt, with contrastive context as in
CUDA-L1: the best kernel and a few weaker ones for the nearest shapes, from the kernel database (this
run's verified kernels) and the seed library (its tuned winners and the reference kernels the tune
timed), each with its measured speedup over the strongest baseline. The context is rebuilt whenever a
prompt is drawn, so it improves as training finds faster kernels; it is trimmed (weakest first) to fit
grpo.max_prompt_length.

Reward. A completion is judged on its shape and up to shapes_per_reward - 1 more of its bucket: a
verified kernel earns the clipped log of the geometric-mean speedup over the strongest baseline;
failures are negative by class; a speedup above reward.recheck_above is re-judged on fresh inputs and
the lower kept (training/rewards.py).

RFT (training/rft.py). With rft.shapes, before GRPO's first step: the policy samples rft.k
completions for that many training shapes, the reward's judge scores them (recorded under
`rl_hgemm_rft`), and the policy is fine-tuned on each shape's fastest verified one; GRPO trains the
fine-tuned model (saved in the work folder, which is also its KL reference). A run resumed from a
GRPO checkpoint does not sample again: it loads the fine-tuned model, and the checkpoint its weights.

Probe. After training, the starting model and the trained one each sample probe.k completions for the
same probe.prompts fixed training shapes, judged: metrics `probe` compares the two problem by problem
on bare prompts, and `probe_context` on the same problems with the contrastive context of the final
database (training/probe.py). The curves' first and last steps saw different, randomly drawn prompts;
the probe compares like with like.

Outputs: model + tokenizer, kernels.sqlite, best_kernels/ (best verified kernel per training shape,
<problem_key>.cu, and index.json), curves.json, heldout.json; `run` returns the metrics.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from datasets import Dataset
from transformers.trainer_utils import get_last_checkpoint

from hgemm.candidate import code_identity
from hgemm.files import write_json
from hgemm.library import dispatch_library
from hgemm.problem import Problem
from kernels_corpus.verbatim import CorpusKernels
from training.context import ContextSettings, ContrastivePrompts, DrawnPrompts
from training.grpo import (
    JudgeSettings,
    check_grpo_section,
    finish_stage,
    grpo_resume_settings,
    load_policy,
    policy_model,
    train_and_save,
    use_bf16,
)
from training.heldout import ShapeSettings, bucket_of, buckets, heldout_record, reward_shapes, split_grid
from training.kerneldb import KernelDB
from training.probe import ContextProbeSettings, probe_model_sets, probe_summary, spread
from training.rewards import KernelReward, RewardSettings, problems_to_json
from training.rft import RFTSettings, rejection_round

STAGE = "rl_hgemm"


@dataclass
class RLHgemmSettings:
    """The `rl_hgemm:` section."""

    # the stage whose model this one goes on training (the DAG's wiring; recorded in metrics.json):
    # rl_general, or pretrain for the ablation that leaves rl_general out
    start_from: str
    shapes: ShapeSettings
    context: ContextSettings
    judge: JudgeSettings
    reward: RewardSettings
    grpo: dict  # trl.GRPOConfig's settings, handed to it whole, and ours (training.grpo.OWN_GRPO_KEYS)
    probe: ContextProbeSettings
    rft: RFTSettings

    def __post_init__(self):
        check_grpo_section(self.grpo)
        if self.start_from not in START_FROM:
            raise ValueError(f"start_from: {self.start_from!r} is not one of {', '.join(START_FROM)}")


START_FROM = ("rl_general", "pretrain")


def probe_problems(train: list[Problem], n: int) -> list[Problem]:
    """The probe's fixed problems: n spread over the training shapes, bucket by bucket."""
    return spread(sorted(train, key=lambda p: (bucket_of(p), p.key)), n)


def probe_row(problem: Problem, prompt: str) -> dict:
    """A probe row (training.probe.probe_model): the prompt, judged on the problem's own shape."""
    return {"prompt": prompt, "problems": problems_to_json([problem]), "problem_key": problem.key}


def build_dataset(train: list[Problem], shape_settings: ShapeSettings):
    groups = buckets(train)
    rows = []
    for p in train:
        shapes = reward_shapes(p, groups[bucket_of(p)], shape_settings.shapes_per_reward)
        rows.append({"problems": problems_to_json(shapes), "problem_key": p.key, "shape_class": p.shape_class,
                     "bucket": bucket_of(p)})
    return Dataset.from_list(rows * max(1, shape_settings.repeats))


def heldout_eval_dataset(heldout: list[Problem], n: int):
    """The held-out curve's prompts: n held-out shapes spread bucket by bucket, each judged on its own
    shape only (a bucket mate could be a training shape) and marked `heldout`, so that the reward
    records them apart from training."""
    picked = spread(sorted(heldout, key=lambda p: (bucket_of(p), p.key)), n)
    return Dataset.from_list([{"problems": problems_to_json([p]), "problem_key": p.key, "shape_class": p.shape_class,
                               "bucket": bucket_of(p), "heldout": True} for p in picked])


def write_best_kernels(db, train: list[Problem], library: dict, folder: Path) -> dict:
    """best_kernels/<key>.cu for every training shape with a verified kernel, index.json with speedups
    and the library's speedup on the same shape; returns the summary for the metrics."""
    folder.mkdir(parents=True, exist_ok=True)
    best = db.best_per_key(STAGE)
    for key, row in db.best_per_key(f"{STAGE}_rft").items():   # the RFT round's samples count too
        if key not in best or (row["speedup_vs_best"] or 0) > (best[key]["speedup_vs_best"] or 0):
            best[key] = row
    index, beats, compared = {}, 0, 0
    for p in train:
        row = best.get(p.key)
        if not row:
            continue
        (folder / f"{p.key}.cu").write_text(row["text"])
        # the library's fastest on this shape; its own kernel written out again does not beat it
        lib = library[p.key][0][1] if p.key in library else None
        own = p.key in library and code_identity(row["text"]) == code_identity(library[p.key][0][0])
        entry = {"sha": row["sha"], "speedup_vs_best": row["speedup_vs_best"],
                 "speedup_vs_cublas": row["speedup_vs_cublas"], "time_us": row["time_us"],
                 "library_speedup_vs_best": lib}
        if lib:
            compared += 1
            beats += row["speedup_vs_best"] > lib and not own
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


class HgemmRL:
    """One rl_hgemm run (stages.common.TrainingJob). Built from the settings, it splits the grid (a bad
    shape setting fails before any state is touched); `run` trains, probes and returns the metrics."""

    def __init__(self, settings: RLHgemmSettings, model_dir: str, library_dir: str | None, work_dir: str,
                 out_dir: str, corpus_dir: str | None = None):
        self.settings, self.model_dir, self.library_dir = settings, model_dir, library_dir
        self.corpus_dir = corpus_dir  # for the verbatim-recitation curve; None: no such curve
        self.work_dir, self.out_dir = work_dir, out_dir
        self.wall_start = time.perf_counter()
        self.train, self.heldout = split_grid(settings.shapes)
        assert not {p.key for p in self.heldout} & {p.key for p in self.train}
        # the held-out curve's size does not change what a checkpoint means
        shapes = {k: v for k, v in asdict(settings.shapes).items() if k != "heldout_eval"}
        self.resume_settings = {"grpo": grpo_resume_settings(settings.grpo), "shapes": shapes,
                                "context": asdict(settings.context), "reward": asdict(settings.reward),
                                "rft": asdict(settings.rft)}
        grid = settings.shapes.grid if isinstance(settings.shapes.grid, str) else None  # an inline grid is in the settings
        self.resume_inputs = {"model": model_dir, "library": library_dir, "grid": grid}

    def warm_start(self, model, tokenizer, dataset, judge, db, resumable: bool) -> tuple:
        """The RFT round before GRPO (rft.shapes of the training shapes, spread over the buckets, their
        prompts drawn as GRPO's are): (the policy GRPO trains, the round's metrics or why it did not run)."""
        s = self.settings
        if not s.rft.shapes:
            return model, {"note": "rft.shapes is 0"}
        tuned = Path(self.work_dir) / "rft" / "model"
        checkpoint = get_last_checkpoint(self.work_dir) if resumable and Path(self.work_dir).is_dir() else None
        if checkpoint:
            note = f"resumed from {checkpoint}"
            if (tuned / "config.json").is_file():   # the KL reference GRPO had before the interruption
                return policy_model(str(tuned), tokenizer), {"note": note + f"; the fine-tuned model is {tuned}"}
            return model, {"note": note + "; no fine-tuned model was saved before it"}
        picked = {p.key for p in probe_problems(self.train, s.rft.shapes)}
        # build_dataset's first len(train) rows are the training shapes in order (then the repeats)
        rows = [dataset[i] for i, p in enumerate(self.train) if p.key in picked]
        reward = KernelReward(judge, db, s.reward, f"{STAGE}_rft")
        try:
            metrics = rejection_round(model, tokenizer, rows, reward, s.rft, s.grpo["max_completion_length"],
                                      str(tuned.parent), s.grpo["max_prompt_length"] + s.grpo["max_completion_length"],
                                      use_bf16(s.grpo.get("bf16", False)))
        finally:
            reward.close()
        if metrics.get("fine_tune"):
            model = policy_model(metrics["fine_tune"]["model"], tokenizer)
        return model, metrics

    def run(self, out: Path, resumable: bool) -> dict:
        s, train, heldout = self.settings, self.train, self.heldout
        heldout_keys = {p.key for p in heldout}
        write_json(out / "heldout.json", heldout_record(s.shapes, train, heldout))
        model, tokenizer = load_policy(self.model_dir)
        tuned = dispatch_library(self.library_dir)
        library = tuned.measured() if tuned else {}
        db = KernelDB(Path(self.work_dir) / "kernels.sqlite")
        prompts = ContrastivePrompts(db, library if s.context.use_library else {}, heldout_keys, tokenizer,
                                     s.grpo["max_prompt_length"], s.context.examples, s.context.nearby_shapes,
                                     s.context.prompt_arch, dispatch=tuned if s.context.use_library else None)
        dataset = build_dataset(train, s.shapes).with_transform(DrawnPrompts(prompts, s.context.share, s.context.seed))

        # The held-out curve: every grpo.eval_steps steps, held-out shapes with the context training
        # prompts get (from training shapes only: held-out shapes are never shown), judged like training
        heldout_eval = (heldout_eval_dataset(heldout, s.shapes.heldout_eval).with_transform(
            DrawnPrompts(prompts, 1.0, s.context.seed)) if s.shapes.heldout_eval and s.grpo.get("eval_steps")
            and heldout else None)
        judge = s.judge.make_judge()
        try:
            model, rft = self.warm_start(model, tokenizer, dataset, judge, db, resumable)
        except BaseException:
            judge.close()   # train_and_save closes it from here on
            raise
        verbatim = CorpusKernels.from_dataset(self.corpus_dir) if self.corpus_dir else None
        summary = train_and_save(model, tokenizer, dataset, s.grpo, judge, db, s.reward, STAGE, self.work_dir,
                                 resumable, out, verbatim=verbatim, eval_dataset=heldout_eval)

        # The probe runs after training, the starting model (still on disk) and the trained one on the same
        # prompts: each probe problem bare, and again with the contrastive context the final database gives
        # it, the kind of prompt training saw once the database had kernels. Each probe problem is judged
        # on its own shape.
        probed = probe_problems(train, s.probe.prompts)
        bare_rows = [probe_row(p, prompts.bare(p)) for p in probed]
        in_context = {p.key: prompts.prompt(p) for p in (probed if s.probe.context else [])}
        context_rows = [probe_row(p, in_context[p.key][0]) for p in probed
                        if p.key in in_context and in_context[p.key][1]]

        # Each model is loaded, sampled and judged once for both sets of prompts (probe_model_sets).
        sets = {name: rows for name, rows in (("bare", bare_rows), ("context", context_rows)) if rows}
        runs = [probe_model_sets(path, sets, s.judge.make_judge, s.probe, s.grpo["max_completion_length"])
                for path in (self.model_dir, str(out))] if sets else []
        for result in (runs[1].values() if runs else []):
            result["model"] = str(self.out_dir)  # where the trained model is published

        def probe(name: str) -> dict:
            if name not in sets:
                return {"prompts": 0, "note": "probe.prompts is 0" if not probed else
                        "probe.context is off" if not s.probe.context else "no probe problem had context examples"}
            return probe_summary(runs[0][name], runs[1][name])

        trained_on = db.problem_keys(STAGE) | db.problem_keys(f"{STAGE}_rft")
        leaked = sorted(trained_on & heldout_keys)
        if leaked:  # cannot happen by construction; checked because a leak would void the held-out table
            raise RuntimeError(f"held-out shapes were judged during training: {leaked[:5]}")
        best = write_best_kernels(db, train, library, out / "best_kernels")
        sample_prompt, kept = prompts.prompt(train[0])
        return finish_stage(
            STAGE, out, db, judge.gpu, "parse+compile+verify+time vs the strongest baseline (GPU)", s.reward,
            summary, self.wall_start, asdict(s),
            best_kernels=best,
            heldout_curve=summary.pop("heldout_curve", []),  # [] without shapes.heldout_eval
            rft=rft,
            probe=probe("bare"),
            probe_context=probe("context") | {"context_examples": {k: n for k, (_, n) in in_context.items()}},
            shapes={"train": len(train), "heldout": len(heldout), "buckets": len(buckets(train)),
                    "shapes_judged": len(trained_on)},
            context={"library_entries": len(library), "library_dir": self.library_dir,
                     "example_prompt_context_kept": kept,
                     "example_prompt_tokens": len(tokenizer(sample_prompt)["input_ids"])},
        )

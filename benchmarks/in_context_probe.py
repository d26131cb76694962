"""Does a pretrained model still write candidates when its prompt holds a kernel, as the RL prompts do?

A model pretrained on bare prompts alone writes word salad when the prompt shows a kernel, as every
rl_general prompt with the task's seed solution does, and every rl_hgemm prompt once the kernel
database has context examples. The corpus frames seed kernels that way too
(kernels_corpus/harvest.py, `context_framings`; benchmarks/in_context/README.md). This probe samples the same
problems both ways, with the RL stages' own prompt builders and judges (training/probe.py), so the
two framings are compared on one model in one run:

    task_bare, task_reference      rl_general prompts without and with the seed solution
    hgemm_bare, hgemm_context      rl_hgemm prompts without and with one reference kernel shown
                                   (speed not measured, as the pretraining documents state it)

Usage (after `snakemake pretrain --configfile configs/gpu-rl.yaml`, which writes the stage configs):
    python -m benchmarks.in_context_probe --model results/gpu-rl/pretrain \
        --rl-general-config results/gpu-rl/.config/rl_general.yaml \
        --rl-hgemm-config results/gpu-rl/.config/rl_hgemm.yaml --out probe.json
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

REFERENCE_GLOB = "kernels_corpus/reference/*.cu"


def task_rows(config: dict, tokenizer, prompts: int) -> dict[str, list[dict]]:
    from stages.common import build_dataclass
    from training.probe import spread
    from training.rl_general import TaskSettings, build_dataset, task_problems

    tasks = build_dataclass(TaskSettings, config["tasks"], "rl_general.tasks")
    limit = config["grpo"]["max_prompt_length"]
    pairs = task_problems(tasks)
    bare, _, _ = build_dataset(pairs, tokenizer, limit, 1, show_reference=False)
    shown, _, no_reference = build_dataset(pairs, tokenizer, limit, 1, show_reference=True)
    # the same tasks both ways: only those whose solution fits the prompt
    keep = [r for r in shown.to_list() if r["task"] not in no_reference]
    by_task = {r["task"]: r for r in bare.to_list()}
    picked = spread(keep, prompts)
    return {"task_bare": [by_task[r["task"]] for r in picked], "task_reference": picked}


def hgemm_rows(config: dict, tokenizer, prompts: int) -> dict[str, list[dict]]:
    from stages.common import build_dataclass
    from training.grpo import prompt_prefix
    from training.heldout import ShapeSettings, split_grid
    from training.prompts import format_problem_prompt
    from training.rl_hgemm import probe_problems, probe_row

    shapes = build_dataclass(ShapeSettings, config["shapes"], "rl_hgemm.shapes")
    arch = config["context"]["prompt_arch"]
    problems = probe_problems(split_grid(shapes)[0], prompts)
    references = [Path(f).read_text() for f in sorted(glob.glob(REFERENCE_GLOB))]
    prefix = prompt_prefix(tokenizer)

    def row(p, context):
        return probe_row(p, prefix + format_problem_prompt(p, context=context, arch=arch))

    return {"hgemm_bare": [row(p, None) for p in problems],
            "hgemm_context": [row(p, [(references[i % len(references)], None)]) for i, p in enumerate(problems)]}


def main(argv: list[str] | None = None) -> int:
    import yaml

    from stages.common import build_dataclass
    from training.grpo import JudgeSettings
    from training.model import load_tokenizer
    from training.probe import ProbeSettings, probe_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--rl-general-config", required=True)
    ap.add_argument("--rl-hgemm-config", required=True)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    tokenizer = load_tokenizer(args.model)
    result = {"model": args.model, "prompts": args.prompts, "k": args.k, "sets": {}}
    for key, path, build in (("rl_general", args.rl_general_config, task_rows),
                             ("rl_hgemm", args.rl_hgemm_config, hgemm_rows)):
        config = yaml.safe_load(Path(path).read_text())[key]
        judge = build_dataclass(JudgeSettings, config["judge"], f"{key}.judge")
        max_new = config["grpo"]["max_completion_length"]
        settings = ProbeSettings(prompts=args.prompts, k=args.k, temperature=config["probe"]["temperature"],
                                 batch_size=64, seed=config["probe"]["seed"])
        for name, rows in build(config, tokenizer, args.prompts).items():
            start = time.perf_counter()
            probe = probe_model(args.model, rows, judge.make_judge, settings, max_new)
            probe["seconds"] = time.perf_counter() - start
            result["sets"][name] = probe
            Path(args.out).write_text(json.dumps(result, indent=1))  # after each set: a timeout keeps the rest
    print(f"{'prompt set':<16} {'completions':>11} {'parse':>6} {'compile':>8} {'correct':>8}")
    for name, p in result["sets"].items():
        print(f"{name:<16} {p['completions']:>11} {p['parse_rate']:>6.2f} {p['compile_rate']:>8.2f} {p['correct_rate']:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

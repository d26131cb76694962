"""Stage: GRPO on the general CUDA kernel task suite, rewarded by verdicts (see training/rl_general.py
for what it does).

    python -m stages.rl_general --config configs/default.yaml --model results/pretrain \\
        --work work/rl_general --out results/rl_general

Writes to --out: the trained model and tokenizer, kernels.sqlite (every evaluated candidate),
curves.json (per logging step), and metrics.json last (first vs last 20% of steps, best speedup per task).
"""

from __future__ import annotations

import argparse
import json

from stages.common import run_training
from stages.config_schema import load_settings

STAGE = "rl_general"
PROG = f"python -m stages.{STAGE}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, action="append",
                   help="experiment config with an 'rl_general' section (configs/default.yaml), or YAML with its "
                        "tasks/judge/reward/grpo/probe sections; repeatable: each file laid over the one before")
    p.add_argument("--model", required=True, help="model folder to start from (stages.pretrain's --out: model + tokenizer)")
    p.add_argument("--corpus", default=None,
                   help="corpus stage folder (dataset/): the curve verbatim_rate counts completions that recite it")
    p.add_argument("--work", required=True,
                   help="resumable state (checkpoints, TensorBoard logs, the kernel DB while training): an unfinished "
                        "run with the same settings and inputs resumes; other state is moved aside to <work>.previous")
    p.add_argument("--out", required=True,
                   help="output folder: model + tokenizer, kernels.sqlite, curves.json, metrics.json (last)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set grpo.max_steps=5 (repeatable; value parsed as YAML)")
    return p


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from training.rl_general import GeneralRL, RLGeneralSettings  # torch, transformers, TRL: after --help

    settings = load_settings(RLGeneralSettings, STAGE, args.config, args.set, PROG)
    metrics = run_training(GeneralRL(settings, args.model, args.work, args.out, args.corpus), args.work, args.out)
    print(json.dumps({k: metrics[k] for k in ("reward_scope", "phases", "status_counts", "wall_time_s")}, indent=2))


if __name__ == "__main__":
    main()

"""Stage: HGEMM-specialised GRPO over the size/batch grid, with a held-out set and contrastive prompts
(see training/rl_hgemm.py for what it does).

    python -m stages.rl_hgemm --config configs/default.yaml --model results/rl_general \\
        --library results/tune --work work/rl_hgemm --out results/rl_hgemm

Writes to --out: model + tokenizer, kernels.sqlite, best_kernels/ (best verified kernel per training
shape, <problem_key>.cu, and index.json), curves.json, heldout.json, metrics.json (last).
"""

from __future__ import annotations

import argparse
import json

from stages.common import run_training
from stages.config_schema import load_settings

STAGE = "rl_hgemm"
PROG = f"python -m stages.{STAGE}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, action="append",
                   help="experiment config with an 'rl_hgemm' section (configs/default.yaml), or YAML with its "
                        "shapes/context/judge/reward/grpo/probe sections; repeatable: each file laid over the one before")
    p.add_argument("--model", required=True, help="model folder to start from (stages.rl_general's --out, or stages.pretrain's: rl_hgemm.start_from)")
    p.add_argument("--library", default=None,
                   help="seed library folder (table.json + kernels/<name>.cu) for contrastive context; may be missing or empty")
    p.add_argument("--corpus", default=None,
                   help="corpus stage folder (dataset/): the curve verbatim_rate counts completions that recite it")
    p.add_argument("--work", required=True,
                   help="resumable state (checkpoints, TensorBoard logs, the kernel DB while training): an unfinished "
                        "run with the same settings and inputs resumes; other state is moved aside to <work>.previous")
    p.add_argument("--out", required=True,
                   help="output folder: model + tokenizer, kernels.sqlite, best_kernels/, curves.json, heldout.json, metrics.json (last)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set grpo.max_steps=5 (repeatable; value parsed as YAML)")
    return p


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    from training.rl_hgemm import HgemmRL, RLHgemmSettings  # torch, transformers, TRL: after --help

    settings = load_settings(RLHgemmSettings, STAGE, args.config, args.set, PROG)
    metrics = run_training(HgemmRL(settings, args.model, args.library, args.work, args.out, args.corpus), args.work, args.out)
    print(json.dumps({k: metrics[k] for k in ("reward_scope", "phases", "best_kernels", "status_counts", "wall_time_s")},
                     indent=2))


if __name__ == "__main__":
    main()

"""Stage: continued pretraining on the CUDA corpus (see training/pretrain.py for what it does).

    python -m stages.pretrain --config configs/default.yaml --corpus results/corpus \\
        --tokenizer results/tokenizer --work work/pretrain --out results/pretrain

Several GPUs, with DeepSpeed ZeRO (what the DAG runs with `pretrain.launch`):

    torchrun --standalone --nproc_per_node=2 -m stages.pretrain ... --deepspeed configs/deepspeed/zero2.json
"""

from __future__ import annotations

import argparse
import json

from stages.common import run_training
from stages.config_schema import load_settings

PROG = "python -m stages.pretrain"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, action="append",
                   help="experiment config with a 'pretrain' section (configs/default.yaml), or YAML with its "
                        "model/train/sample sections; repeatable: each file laid over the one before")
    p.add_argument("--corpus", required=True,
                   help="corpus folder: a DatasetDict saved with save_to_disk, 'text' column, train/validation splits")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer folder written by stages.tokenizer (not needed with model.use_model_tokenizer)")
    p.add_argument("--work", required=True,
                   help="resumable state (checkpoints, TensorBoard logs): an unfinished run with the same settings and "
                        "inputs resumes from its last checkpoint; other state is moved aside to <work>.previous")
    p.add_argument("--out", required=True,
                   help="output folder: final model and tokenizer, loss_curve.json, samples.jsonl, metrics.json (last)")
    p.add_argument("--deepspeed", default=None,
                   help="DeepSpeed JSON config (configs/deepspeed/zero2.json or zero3.json), passed to the Trainer; "
                        "default: the config's launch.deepspeed")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one setting, e.g. --set train.max_steps=50 (repeatable; value parsed as YAML)")
    return p


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    # Imported here so that --help answers without loading torch.
    from training.pretrain import PretrainConfig, Pretraining

    settings = load_settings(PretrainConfig, "pretrain", args.config, args.set, PROG)
    job = Pretraining(settings, args.corpus, args.tokenizer, args.work, args.deepspeed or settings.launch.deepspeed)
    metrics = run_training(job, args.work, args.out)
    if metrics is not None:
        keys = ("train_loss", "eval_loss", "perplexity", "tokens_per_second", "mfu", "parse_rate", "compile_rate",
                "pass_rate", "wall_time_s")
        print(json.dumps({k: metrics[k] for k in keys}, indent=2))


if __name__ == "__main__":
    main()

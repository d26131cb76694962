"""Stage: k candidates per evaluation shape from the final model, judged, and the best kept per shape
(see training/best_of_k.py for what it does).

    python -m stages.sample --config configs/default.yaml --model results/rl_hgemm \\
        --heldout results/rl_hgemm/heldout.json --library results/tune --out results/sample

Evaluation shapes are the `grid` of the config plus every shape rl_hgemm held out of training; with
`context: true` prompts carry rl_hgemm's contrastive context. On a CPU candidates are only parsed and
compiled, and every output says nothing was timed. Writes samples.jsonl (one line per candidate),
best/<shape key>.cu, best.json, evaluated.json, metrics.json (last).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from hgemm.problem import GridError
from kernels_corpus.verbatim import CorpusKernels
from stages.common import write_metrics
from stages.config_schema import load_settings
from training.best_of_k import SampleSettings, context_prompter, evaluation_problems, model_generator, run_sample
from training.heldout import heldout_problems

PROG = "python -m stages.sample"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, action="append",
                    help="experiment config with a 'sample:' section (configs/default.yaml), or YAML with the sample "
                         "settings; repeatable: each file laid over the one before")
    ap.add_argument("--model", required=True, help="final model folder (rl_hgemm output: model and tokenizer)")
    ap.add_argument("--heldout", default=None, help="rl_hgemm's heldout.json: shapes held out of training")
    ap.add_argument("--corpus", default=None,
                    help="corpus stage folder (dataset/): count the candidates that recite a corpus kernel")
    ap.add_argument("--library", default=None, help="seed library folder (stages.tune output), for context")
    ap.add_argument("--kernels-db", default=None, help="kernel database for context (default: MODEL/kernels.sqlite)")
    ap.add_argument("--out", required=True,
                    help="output folder: samples.jsonl, best/, best.json, evaluated.json, metrics.json")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one setting (value parsed as YAML); repeatable")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    settings = load_settings(SampleSettings, "sample", args.config, args.overrides, PROG)
    if args.heldout and not Path(args.heldout).is_file():
        ap.error(f"--heldout {args.heldout}: no such file")
    try:  # a bad grid, selection or heldout.json is told before the model loads
        heldout = heldout_problems(args.heldout)
        evaluation_problems(settings, heldout)
    except GridError as e:
        raise SystemExit(f"{PROG}: {e}") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"{PROG}: {args.heldout}: not JSON (line {e.lineno}: {e.msg})") from None
    (Path(args.out) / "metrics.json").unlink(missing_ok=True)  # a stale one would claim this run finished
    t0 = time.time()
    prompter = context_prompter(settings, args.model, args.library, heldout, args.kernels_db) if settings.context else None
    verbatim = CorpusKernels.from_dataset(args.corpus) if args.corpus else None
    generate = model_generator(args.model, settings)
    setup_s = time.time() - t0  # the library, kernel database, corpus and model loaded, before run_sample's phases
    metrics = run_sample(settings, generate, args.heldout, args.out, prompter=prompter, verbatim=verbatim)
    write_metrics(args.out, {**metrics, "setup_s": setup_s})
    print(f"sample: {metrics['samples']} candidates over {metrics['shapes']} shapes, statuses {metrics['statuses']}"
          f"{'' if metrics['timed'] else ' (compiled only, nothing timed)'} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

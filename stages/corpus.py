"""Stage: build the CUDA pretraining corpus (harvest, filter, dedup, decontaminate, split).

    python -m stages.corpus --config configs/default.yaml --out results/corpus [--set family_variants=50]
"""

from __future__ import annotations

import argparse
import logging
import sys

from kernels_corpus.build import CorpusConfig, build_corpus
from stages.common import write_metrics
from stages.config_schema import load_settings

PROG = "python -m stages.corpus"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, action="append",
                        help="experiment config with a 'corpus:' section (configs/default.yaml), or YAML with the "
                             "corpus settings; repeatable: each file laid over the one before")
    parser.add_argument("--out", required=True,
                        help="output dir: dataset/ (datasets.DatasetDict), stats.json, stats.md, metrics.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting (value parsed as YAML); repeatable")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars (e.g. in CI logs)")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    cfg = load_settings(CorpusConfig, "corpus", args.config, args.overrides, PROG)
    metrics = build_corpus(cfg, args.out, progress=not args.no_progress)
    write_metrics(args.out, metrics)
    print(f"corpus: {metrics['documents']:,} documents, {metrics['bytes']:,} bytes in {metrics['build_seconds']} s "
          f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

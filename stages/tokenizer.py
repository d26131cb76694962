"""Stage: train the byte-level BPE tokenizer on the corpus (or adopt a base model's) and add format tokens.

    python -m stages.tokenizer --config configs/default.yaml --corpus results/corpus --out results/tokenizer
"""

from __future__ import annotations

import argparse
import logging
import sys

from kernels_corpus.tokenizer import TokenizerConfig, build_tokenizer
from stages.common import write_metrics
from stages.config_schema import load_settings

PROG = "python -m stages.tokenizer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, action="append",
                        help="experiment config with a 'tokenizer:' section (configs/default.yaml), or YAML with the "
                             "tokenizer settings; repeatable: each file laid over the one before")
    parser.add_argument("--corpus", required=True, help="output dir of the corpus stage (holds dataset/)")
    parser.add_argument("--out", required=True,
                        help="output dir: tokenizer files (AutoTokenizer.from_pretrained), stats.json, stats.md, "
                             "metrics.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting (value parsed as YAML); repeatable")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars (e.g. in CI logs)")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    cfg = load_settings(TokenizerConfig, "tokenizer", args.config, args.overrides, PROG)
    metrics = build_tokenizer(cfg, args.corpus, args.out, progress=not args.no_progress)
    write_metrics(args.out, metrics)
    print(f"tokenizer: vocab {metrics['vocab_size']:,}, {metrics['bytes_per_token']} bytes/token -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

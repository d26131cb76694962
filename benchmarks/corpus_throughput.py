"""Corpus build throughput: documents per second of the default corpus build (and, optionally, the tokenizer).

    python benchmarks/corpus_throughput.py                      # default config, results in benchmarks/corpus/
    python benchmarks/corpus_throughput.py --with-tokenizer     # also train the default tokenizer on it

Writes to --out: stats.json and stats.md (the corpus statistics), throughput.json, and with --with-tokenizer
tokenizer_stats.json and tokenizer_stats.md. The built dataset itself goes to a temporary directory.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a plain checkout

from kernels_corpus.build import CorpusConfig, build_corpus  # noqa: E402
from kernels_corpus.tokenizer import TokenizerConfig, build_tokenizer  # noqa: E402
from stages.common import build_dataclass, load_stage_config, write_json  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def versions(names: list[str]) -> dict:
    found = {}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(ROOT / "configs/default.yaml"),
                        help="experiment config whose 'corpus:' and 'tokenizer:' sections are used")
    parser.add_argument("--out", default=str(HERE / "corpus"), help="where the statistics and timings go")
    parser.add_argument("--with-tokenizer", action="store_true", help="also train the tokenizer and time it")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one corpus setting (value parsed as YAML); repeatable")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    args = parser.parse_args(argv)

    cfg = build_dataclass(CorpusConfig, load_stage_config(args.config, "corpus", args.overrides), "corpus")
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="corpus-bench-"))
    try:
        start = time.perf_counter()
        metrics = build_corpus(cfg, work / "corpus", progress=not args.no_progress)
        seconds = time.perf_counter() - start
        result = {
            "config": os.path.relpath(args.config, ROOT),
            "build_seconds": round(seconds, 2),
            "harvested_docs": metrics["harvested_documents"],
            "harvested_docs_per_second": round(metrics["harvested_documents"] / seconds, 1),
            "corpus_docs": metrics["documents"],
            "corpus_docs_per_second": round(metrics["documents"] / seconds, 1),
            "corpus_bytes": metrics["bytes"],
            "corpus_megabytes_per_second": round(metrics["bytes"] / seconds / 1e6, 3),
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus": os.cpu_count()},
            "packages": versions(["datasets", "datasketch", "tokenizers", "transformers", "nvidia-cutlass",
                                  "torch", "cupy", "pycuda"]),
        }
        for name in ("stats.json", "stats.md"):
            out.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(work / "corpus" / name, out / name)
        if args.with_tokenizer:
            tcfg = build_dataclass(TokenizerConfig, load_stage_config(args.config, "tokenizer"), "tokenizer")
            start = time.perf_counter()
            tmetrics = build_tokenizer(tcfg, work / "corpus", work / "tokenizer", progress=not args.no_progress)
            result["tokenizer_seconds"] = round(time.perf_counter() - start, 2)
            result["tokenizer_vocab_size"] = tmetrics["vocab_size"]
            result["bytes_per_token"] = tmetrics["bytes_per_token"]
            result["train_tokens"] = tmetrics["train_tokens"]
            result["validation_tokens"] = tmetrics["validation_tokens"]
            shutil.copyfile(work / "tokenizer" / "stats.json", out / "tokenizer_stats.json")
            shutil.copyfile(work / "tokenizer" / "stats.md", out / "tokenizer_stats.md")
        write_json(out / "throughput.json", result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"corpus build: {result['build_seconds']} s, {result['harvested_docs_per_second']} harvested docs/s, "
          f"{result['corpus_docs']} corpus docs ({result['corpus_docs_per_second']} docs/s)"
          + (f"; tokenizer {result['tokenizer_seconds']} s, {result['bytes_per_token']} bytes/token"
             if args.with_tokenizer else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

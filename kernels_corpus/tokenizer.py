"""The tokenizer: a byte-level BPE trained on the CUDA corpus, or a base model's tokenizer, plus format tokens.

Byte-level so that any kernel text (odd whitespace, non-ASCII comments) round-trips exactly. The special tokens
frame the prompt/candidate format of kernels_corpus/framing.py: `<|problem|> ... <|candidate|> ... <|end|>`.
Outputs in `out_dir`: the transformers tokenizer files (save_pretrained, loadable with AutoTokenizer),
`stats.json` and `stats.md` (tokens per source and licence, bytes per token); the stage writes metrics.json.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

from tqdm import tqdm

from hgemm.files import atomic_write_text, config_hash, write_json
from kernels_corpus.framing import SPECIAL_TOKENS as FORMAT_TOKENS
from kernels_corpus.harvest import resolve_project_path

ROLE_TOKENS = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}


@dataclass
class TokenizerConfig:
    """The `tokenizer:` section (values: configs/default.yaml)."""

    vocab_size: int  # byte-level BPE vocabulary, special tokens included
    min_frequency: int
    base_model: str | None  # a local model dir: use its tokenizer instead of training one
    max_train_docs: int | None  # cap on training documents (taken in dataset order); None = all
    batch_size: int


def _batches(texts: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(texts), size):
        yield texts[i : i + size]


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2, progress: bool = True):
    """A byte-level BPE trained with HF tokenizers, wrapped as a transformers PreTrainedTokenizerFast."""
    # tokenizers and transformers load only where a tokenizer is made (seconds of import for transformers)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = list(ROLE_TOKENS.values()) + list(FORMAT_TOKENS)
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,  # first, so their ids are 0..5 whatever the corpus
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: nothing is ever unknown
        show_progress=progress,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        additional_special_tokens=list(FORMAT_TOKENS),
        clean_up_tokenization_spaces=False,  # code whitespace is meaningful
        **ROLE_TOKENS,
    )


def from_base_model(path: str):
    """The base model's tokenizer with the format tokens (and any missing role tokens) added."""
    from transformers import AutoTokenizer  # heavy: only where a tokenizer is made

    tok = AutoTokenizer.from_pretrained(resolve_project_path(path))
    missing_roles = {k: v for k, v in ROLE_TOKENS.items() if getattr(tok, k, None) is None}
    if missing_roles:
        tok.add_special_tokens(missing_roles)
    tok.add_tokens([t for t in FORMAT_TOKENS if t not in tok.get_vocab()], special_tokens=True)
    return tok


def count_tokens(tok, texts: list[str], batch_size: int, progress: bool) -> list[int]:
    counts = []
    total = -(-len(texts) // batch_size)
    for batch in tqdm(_batches(texts, batch_size), total=total, desc="tokenize", unit="batch", disable=not progress):
        counts += [len(ids) for ids in tok(batch, add_special_tokens=False)["input_ids"]]
    return counts


def build_tokenizer(cfg: TokenizerConfig, corpus_dir: str | Path, out_dir: str | Path, progress: bool = True) -> dict:
    """Train (or adopt) the tokenizer for the corpus at `corpus_dir`; save it and its stats to `out_dir`."""
    from datasets import load_from_disk  # heavy (pyarrow, pandas): only where the corpus is read

    start = time.perf_counter()
    corpus = load_from_disk(str(Path(corpus_dir) / "dataset"))
    train_texts = corpus["train"]["text"]
    if cfg.max_train_docs is not None:
        train_texts = train_texts[: cfg.max_train_docs]
    if cfg.base_model:
        tok = from_base_model(cfg.base_model)
        kind = f"base model {cfg.base_model}"
    else:
        tok = train_bpe(_batches(list(train_texts), cfg.batch_size), cfg.vocab_size, cfg.min_frequency, progress)
        kind = "byte-level BPE trained on the corpus"
    _save_pretrained_atomically(tok, Path(out_dir))

    splits, groups = {}, defaultdict(lambda: {"docs": 0, "bytes": 0, "tokens": 0})
    for name, split in corpus.items():
        texts = split["text"]
        counts = count_tokens(tok, texts, cfg.batch_size, progress)
        n_bytes = [len(t.encode("utf-8")) for t in texts]
        splits[name] = _summary(len(texts), sum(n_bytes), sum(counts))
        for key_cols in (("source", "package"), ("licence",)):
            for i, key in enumerate(zip(*(split[c] for c in key_cols))):
                g = groups[(key_cols, key)]
                g["docs"] += 1
                g["bytes"] += n_bytes[i]
                g["tokens"] += counts[i]
    by = {
        cols: [{**dict(zip(cols, key)), **_summary(**g)} for (c, key), g in sorted(groups.items()) if c == cols]
        for cols in (("source", "package"), ("licence",))
    }
    eval_split = "validation" if splits.get("validation", {}).get("tokens") else "train"
    stats = {
        "config_hash": config_hash(asdict(cfg)),
        "tokenizer": kind,
        "vocab_size": len(tok),
        "special_tokens": {**ROLE_TOKENS, "format": list(FORMAT_TOKENS)},
        "bytes_per_token": splits[eval_split]["bytes_per_token"],
        "bytes_per_token_split": eval_split,
        "splits": splits,
        "by_source": by[("source", "package")],
        "by_licence": by[("licence",)],
    }
    write_json(Path(out_dir) / "stats.json", stats)
    atomic_write_text(Path(out_dir) / "stats.md", stats_markdown(stats))
    return {
        "tokenizer": kind,
        "vocab_size": len(tok),
        "bytes_per_token": stats["bytes_per_token"],
        "bytes_per_token_split": eval_split,
        "train_tokens": splits.get("train", {}).get("tokens", 0),
        "validation_tokens": splits.get("validation", {}).get("tokens", 0),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _summary(docs: int, bytes: int, tokens: int) -> dict:  # noqa: A002 - mirrors the stats keys
    return {"docs": docs, "bytes": bytes, "tokens": tokens, "bytes_per_token": round(bytes / tokens, 4) if tokens else 0.0}


def _save_pretrained_atomically(tok, out_dir: Path) -> None:
    """save_pretrained into a temp dir beside out_dir, then move each file in with os.replace."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir, prefix=".tokenizer."))
    try:
        tok.save_pretrained(str(tmp))
        for f in sorted(tmp.iterdir()):
            os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stats_markdown(stats: dict) -> str:
    def table(header, rows):
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in r) + " |"
                                  for r in rows])

    cols = ["docs", "bytes", "tokens", "bytes_per_token"]
    return "\n\n".join([
        "# Tokenizer statistics",
        f"{stats['tokenizer']}, vocabulary {stats['vocab_size']:,}. Bytes per token on the "
        f"{stats['bytes_per_token_split']} split: **{stats['bytes_per_token']}**.",
        "## Splits",
        table(["split"] + cols, [[name] + [s[c] for c in cols] for name, s in stats["splits"].items()]),
        "## By source",
        table(["source", "package"] + cols, [[r["source"], r["package"]] + [r[c] for c in cols] for r in stats["by_source"]]),
        "## By licence",
        table(["licence"] + cols, [[r["licence"]] + [r[c] for c in cols] for r in stats["by_licence"]]),
    ]) + "\n"

"""The pretraining corpus as fixed-length blocks of tokens.

The corpus stage writes a DatasetDict (save_to_disk) with a `text` column and `train`/`validation`
splits. Each document becomes bos + tokens + eos; documents are concatenated and cut into blocks of
`block_size` tokens, so no step is spent on padding. Attention crosses document boundaries inside a
block, as in most packed pretraining; the eos between documents tells the model where one ends.

Sources can be weighted (`train.source_weights`): the project's own candidate-format documents are a
few percent of the corpus next to the harvested package sources, and a short run learns the format
only if it sees them more often. Weighting repeats documents of the train split (the fractional part
by a seeded draw) and shuffles document order, so the copies land in different blocks; the
validation split is never weighted, so eval loss stays comparable across mixes.

The maps keep their results in memory: the corpus folder is another stage's output and must not
collect cache files, and tokenising again on resume takes seconds, not minutes.
"""

from __future__ import annotations

import logging
import os
from itertools import chain
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict, load_from_disk
from transformers import PreTrainedTokenizerBase

from kernels_corpus.harvest import SOURCES

log = logging.getLogger(__name__)

SPLITS = ("train", "validation")


def load_corpus(path: str) -> DatasetDict:
    """The corpus DatasetDict at path, or at path/dataset (where the corpus stage writes it)."""
    if not (Path(path) / "dataset_dict.json").exists() and (Path(path) / "dataset").is_dir():
        path = str(Path(path) / "dataset")
    corpus = load_from_disk(path)
    if not isinstance(corpus, DatasetDict):
        raise ValueError(f"{path}: expected a DatasetDict with splits {SPLITS}, got a single {type(corpus).__name__}")
    for split in SPLITS:
        if split not in corpus:
            raise ValueError(f"{path}: split '{split}' missing (has {sorted(corpus)})")
        if "text" not in corpus[split].column_names:
            raise ValueError(f"{path}: split '{split}' has no 'text' column (has {corpus[split].column_names})")
    return corpus


def _map_workers(n_rows: int, requested: int | None) -> int | None:
    if requested is not None:
        return requested if requested > 1 else None
    # Worker processes only pay off on a big corpus; datasets wants None rather than 1.
    workers = min(os.cpu_count() or 1, 16)
    return workers if n_rows >= 20_000 and workers > 1 else None


def weight_sources(ds: Dataset, weights: dict[str, float] | None, seed: int = 0) -> Dataset:
    """Each document repeated by its source's weight (default 1; 0 drops it), in a shuffled order.

    A weight of 2.5 gives every document two copies and a third with probability 1/2."""
    if not weights:
        return ds
    if "source" not in ds.column_names:
        raise ValueError("train.source_weights needs a 'source' column in the corpus")
    unknown = sorted(set(weights) - set(SOURCES))
    if unknown:
        raise ValueError(f"train.source_weights: unknown source(s) {unknown}; the corpus has {list(SOURCES)}")
    absent = sorted(set(weights) - set(ds.unique("source")))
    if absent:  # e.g. a corpus built without tasks: the weight has nothing to act on
        log.warning("train.source_weights: no document of source %s in this corpus", absent)
    if any(w < 0 for w in weights.values()):
        raise ValueError("train.source_weights must be >= 0")
    rng = np.random.default_rng(seed)
    w = np.array([float(weights.get(src, 1.0)) for src in ds["source"]])
    copies = np.floor(w).astype(int) + (rng.random(len(w)) < w - np.floor(w))
    order = np.repeat(np.arange(len(ds)), copies)
    rng.shuffle(order)
    return ds.select(order.tolist())


def source_token_shares(tokenized: Dataset) -> dict[str, float]:
    """Share of the tokens per source in a tokenized split (as training sees them, after weighting)."""
    totals: dict[str, int] = {}
    for src, ids in zip(tokenized["source"], tokenized["input_ids"]):
        totals[src] = totals.get(src, 0) + len(ids)
    n = sum(totals.values()) or 1
    return {src: round(count / n, 4) for src, count in sorted(totals.items())}


def tokenize_documents(ds: Dataset, tokenizer: PreTrainedTokenizerBase, num_proc: int | None = None) -> Dataset:
    """One row per document: input_ids = [bos] + tokens + [eos] (bos/eos only where the tokenizer has them);
    the `source` column is kept where there is one."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def encode(batch):
        ids = tokenizer(batch["text"], add_special_tokens=False)["input_ids"]
        return {"input_ids": [bos + x + eos for x in ids]}

    return ds.map(
        encode,
        batched=True,
        remove_columns=[c for c in ds.column_names if c != "source"],
        num_proc=_map_workers(len(ds), num_proc),
        keep_in_memory=True,
        desc="tokenize",
    )


def pack_blocks(tokenized: Dataset, block_size: int, num_proc: int | None = None) -> Dataset:
    """Concatenate documents and cut into blocks of block_size; labels are the inputs (the model shifts).

    The tail shorter than a block is dropped, per map batch of 1000 documents: at most one block's
    worth of tokens lost per batch."""

    def group(batch):
        flat = list(chain.from_iterable(batch["input_ids"]))
        usable = len(flat) // block_size * block_size
        blocks = [flat[i:i + block_size] for i in range(0, usable, block_size)]
        return {"input_ids": blocks, "labels": [list(b) for b in blocks]}

    return tokenized.map(
        group,
        batched=True,
        batch_size=1000,
        remove_columns=tokenized.column_names,
        num_proc=_map_workers(len(tokenized), num_proc),
        keep_in_memory=True,
        desc=f"pack into {block_size}-token blocks",
    )


def packed_splits(
    corpus: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    block_size: int,
    max_eval_blocks: int | None = None,
    num_proc: int | None = None,
    source_weights: dict[str, float] | None = None,
    seed: int = 0,
    shares: dict | None = None,
) -> tuple[Dataset, Dataset]:
    """(train, validation) as packed blocks; refuses a split too small to fill one block.

    source_weights apply to train only (weight_sources); `shares`, when given, receives each split's
    token share per source."""
    out = {}
    for split in SPLITS:
        docs = weight_sources(corpus[split], source_weights, seed) if split == "train" else corpus[split]
        tokenized = tokenize_documents(docs, tokenizer, num_proc)
        if shares is not None and "source" in tokenized.column_names:
            shares[split] = source_token_shares(tokenized)
        packed = pack_blocks(tokenized, block_size, num_proc)
        if len(packed) == 0:
            raise ValueError(
                f"corpus split '{split}' yields no full block of {block_size} tokens; "
                "use a smaller train.block_size or a bigger corpus"
            )
        out[split] = packed
    validation = out["validation"]
    if max_eval_blocks and len(validation) > max_eval_blocks:
        # A fixed, evenly spread subset keeps evaluation cheap and comparable across runs.
        step = len(validation) / max_eval_blocks
        validation = validation.select([int(i * step) for i in range(max_eval_blocks)])
    return out["train"], validation

"""Exact and near-duplicate removal.

Exact: SHA-256 of the text with whitespace runs collapsed, so re-indented copies count as the same file.
Near: MinHash signatures of token shingles, indexed with datasketch's LSH; a candidate the index returns is
confirmed by its estimated Jaccard similarity before the document is dropped. The first document in input
order wins, so the result depends only on the (deterministic) input order and the seed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Sequence

from datasketch import MinHash, MinHashLSH
from tqdm import tqdm

from kernels_corpus.harvest import Document

# Identifiers, numbers, and single punctuation characters: the units code similarity is measured in.
CODE_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class DedupSettings:
    """The corpus config's dedup_* settings (kernels_corpus.build.CorpusConfig)."""

    threshold: float
    num_perm: int
    shingle_tokens: int
    seed: int
    # Sources whose documents are only exact-deduplicated: the seed-family variants differ from each other
    # by tile parameters on purpose, and their share is set by the configured variant count instead.
    near_dup_exempt_sources: tuple[str, ...]


@dataclass
class DedupResult:
    kept: list[int] = field(default_factory=list)
    exact_duplicates: int = 0
    near_duplicates: int = 0
    # dropped index -> the index of the kept document it duplicates (for audits and tests)
    duplicate_of: dict[int, int] = field(default_factory=dict)


def exact_key(text: str) -> str:
    return hashlib.sha256(_WHITESPACE.sub(" ", text).strip().encode("utf-8")).hexdigest()


def shingles(text: str, k: int) -> set[bytes]:
    tokens = CODE_TOKEN.findall(text)
    if len(tokens) < k:
        return {" ".join(tokens).encode()}
    return {" ".join(tokens[i : i + k]).encode() for i in range(len(tokens) - k + 1)}


def deduplicate(docs: Sequence[Document], s: DedupSettings, progress: bool = True) -> DedupResult:
    result = DedupResult()
    seen_exact: dict[str, int] = {}
    lsh = MinHashLSH(threshold=s.threshold, num_perm=s.num_perm)
    signatures: dict[int, MinHash] = {}
    # One set of permutations shared by every signature; building them per document dominates otherwise.
    template = MinHash(num_perm=s.num_perm, seed=s.seed)
    # datasketch >= 2 wants the hashing scheme named when permutations are passed in; 1.x has no scheme.
    shared = {"permutations": template.permutations}
    if hasattr(template, "scheme"):
        shared["scheme"] = template.scheme
    for i, doc in enumerate(tqdm(docs, desc="dedup", unit="doc", disable=not progress)):
        key = exact_key(doc.text)
        if key in seen_exact:
            result.exact_duplicates += 1
            result.duplicate_of[i] = seen_exact[key]
            continue
        seen_exact[key] = i
        if doc.source not in s.near_dup_exempt_sources:
            sig = MinHash(num_perm=s.num_perm, seed=s.seed, **shared)
            sig.update_batch(sorted(shingles(doc.text, s.shingle_tokens)))
            match = _confirmed_match(lsh, signatures, sig, s.threshold)
            if match is not None:
                result.near_duplicates += 1
                result.duplicate_of[i] = match
                continue
            lsh.insert(i, sig)
            signatures[i] = sig
        result.kept.append(i)
    return result


def _confirmed_match(lsh: MinHashLSH, signatures: dict, sig: MinHash, threshold: float) -> int | None:
    """The earliest indexed document whose estimated Jaccard similarity reaches the threshold."""
    for j in sorted(lsh.query(sig)):
        if signatures[j].jaccard(sig) >= threshold:
            return j
    return None

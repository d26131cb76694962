"""Decontamination: no training document may contain a kernel held out for evaluation.

Both sides are reduced to code tokens with comments removed (so a re-commented copy still matches), then cut
into n-grams. A document is contaminated by a held-out kernel when it contains at least `threshold` of that
kernel's distinct n-grams. A fraction rather than "any shared n-gram" because short CUDA idioms (the HGEMM
argument list, index arithmetic) are common to every GEMM and would otherwise flag the whole corpus; docs
with any overlap are still counted in the report.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from kernels_corpus.dedup import CODE_TOKEN
from kernels_corpus.harvest import Document, project_relative, resolve_project_path

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)

NGram = tuple[str, ...]


@dataclass(frozen=True)
class HeldOut:
    path: str
    ngrams: frozenset


def code_ngrams(text: str, n: int) -> set[NGram]:
    tokens = CODE_TOKEN.findall(_COMMENT.sub(" ", text))
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return set(zip(*(tokens[i:] for i in range(n))))


def load_heldout(patterns: Sequence[str], n: int) -> list[HeldOut]:
    files = sorted({f for p in patterns for f in glob.glob(resolve_project_path(p), recursive=True)})
    # Recorded repo-relative, so the committed statistics do not depend on where the checkout lives.
    return [HeldOut(project_relative(f), frozenset(code_ngrams(Path(f).read_text(encoding="utf-8"), n)))
            for f in files]


def find_contaminated(
    docs: Sequence[Document], heldout: Sequence[HeldOut], n: int, threshold: float, progress: bool = True
) -> tuple[set[int], dict]:
    """Indices of contaminated documents, and a report with per-held-out-kernel counts."""
    owners: dict[NGram, list[int]] = {}
    for h_index, h in enumerate(heldout):
        for gram in h.ngrams:
            owners.setdefault(gram, []).append(h_index)
    per_kernel = [
        {"path": h.path, "ngrams": len(h.ngrams), "docs_dropped": 0, "docs_any_overlap": 0, "max_overlap": 0.0}
        for h in heldout
    ]
    contaminated: set[int] = set()
    max_kept = 0.0  # the closest any kept document comes to a held-out kernel: evidence for the report
    if owners:
        for i, doc in enumerate(tqdm(docs, desc="decontam", unit="doc", disable=not progress)):
            shared = code_ngrams(doc.text, n) & owners.keys()
            if not shared:
                continue
            hits = [0] * len(heldout)
            for gram in shared:
                for h_index in owners[gram]:
                    hits[h_index] += 1
            worst = 0.0
            for h_index, count in enumerate(hits):
                if not count:
                    continue
                overlap = count / len(heldout[h_index].ngrams)
                worst = max(worst, overlap)
                row = per_kernel[h_index]
                row["docs_any_overlap"] += 1
                row["max_overlap"] = round(max(row["max_overlap"], overlap), 4)
                if overlap >= threshold:
                    row["docs_dropped"] += 1
                    contaminated.add(i)
            if i not in contaminated:
                max_kept = max(max_kept, worst)
    report = {
        "ngram": n,
        "threshold": threshold,
        "heldout_kernels": len(heldout),
        "docs_checked": len(docs),
        "docs_dropped": len(contaminated),
        "rate": round(len(contaminated) / len(docs), 6) if docs else 0.0,
        "max_overlap_kept": round(max_kept, 4),
        "per_kernel": per_kernel,
    }
    return contaminated, report

"""Which generated kernels are corpus documents written out again, character for character.

A policy that recites what it was pretrained on gets rewards, and the curves then show learning that
is memory. The index holds every kernel the corpus shows: each framed document's answer (between the
candidate and end tokens), each kernel shown in a prompt's context (```cuda fences), and each raw
source document whole. A completion matches when its candidate text is one of them after
normalisation: line ends stripped, and the first line dropped where it is a tuned document's
measurement comment (a model that recites the kernel without it still recites).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from kernels_corpus.framing import CANDIDATE_TOKEN, END_TOKEN

_FENCE = re.compile(r"```cuda\n(.*?)```", re.S)
_MEASURED = re.compile(r"^// measured on .*\n")


def normalise(text: str) -> str:
    text = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return _MEASURED.sub("", text, count=1).strip()


def _digest(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


def kernels_of(document: str) -> list[str]:
    """The kernels a corpus document shows: its framed answer and context kernels, or the whole text."""
    if CANDIDATE_TOKEN not in document:
        return [document]
    prompt, _, rest = document.partition(CANDIDATE_TOKEN)
    return [rest.split(END_TOKEN, 1)[0], *_FENCE.findall(prompt)]


class CorpusKernels:
    """Digests of every kernel the corpus shows, each with the path of a document that shows it."""

    def __init__(self, documents: list[tuple[str, str]]):
        self.where: dict[str, str] = {}
        for path, text in documents:
            for kernel in kernels_of(text):
                if normalise(kernel):
                    self.where.setdefault(_digest(kernel), path)

    @classmethod
    def from_dataset(cls, corpus_dir: str | Path) -> "CorpusKernels":
        """From a corpus stage folder (dataset/, a datasets.DatasetDict with `path` and `text`): every split."""
        from datasets import load_from_disk  # heavy; only where a stage checks completions against the corpus

        data = load_from_disk(str(Path(corpus_dir) / "dataset"))
        return cls([(row["path"], row["text"]) for split in data.values() for row in split])

    def match(self, candidate: str) -> str | None:
        """The path of a corpus document that shows this kernel verbatim, else None."""
        return self.where.get(_digest(candidate)) if normalise(candidate) else None

    def __len__(self) -> int:
        return len(self.where)

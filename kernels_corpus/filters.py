"""Quality filters: keep hand-written CUDA source, drop everything a kernel-writing model should not imitate.

Each check returns the reason a document is dropped (a short stable name, used as a statistics key) or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from kernels_corpus.harvest import Document, licence_allowed

_WORD = re.compile(r"[A-Za-z_]\w*|\d[\w.]*")
_NUMBER = re.compile(r"\d[\w.]*|0[xX][0-9a-fA-F]+")


@dataclass(frozen=True)
class FilterSettings:
    min_bytes: int
    max_bytes: int
    cuda_markers: tuple[str, ...]
    generated_markers: tuple[str, ...]
    generated_head_bytes: int
    max_numeric_fraction: float
    max_line_length: int
    licence_allowlist: tuple[str, ...]

    @cached_property
    def cuda_pattern(self) -> re.Pattern:
        return re.compile("|".join(f"(?:{m})" for m in self.cuda_markers))

    @cached_property
    def generated_pattern(self) -> re.Pattern:
        return re.compile("|".join(f"(?:{m})" for m in self.generated_markers), re.IGNORECASE)


def looks_generated(text: str, s: FilterSettings) -> bool:
    """Generated tables and instantiation dumps: a generator banner, giant lines, or mostly number literals."""
    if s.generated_markers and s.generated_pattern.search(text[: s.generated_head_bytes]):
        return True
    if max((len(line) for line in text.splitlines()), default=0) > s.max_line_length:
        return True
    words = _WORD.findall(text)
    if len(words) >= 200:  # too few words make the ratio noise
        numeric = sum(1 for w in words if _NUMBER.fullmatch(w))
        if numeric / len(words) > s.max_numeric_fraction:
            return True
    return False


def drop_reason(doc: Document, s: FilterSettings) -> str | None:
    """Why `doc` is dropped, or None to keep it. Cheap checks first: most harvested headers fail early."""
    if not licence_allowed(doc.licence, s.licence_allowlist):
        return "licence"
    size = len(doc.text.encode("utf-8"))
    if size < s.min_bytes:
        return "too_small"
    if size > s.max_bytes:
        return "too_large"
    if not s.cuda_pattern.search(doc.text):
        return "no_cuda"
    # Project kernels (seed-family variants above all) are rendered from templates on purpose: only
    # harvested package files are judged as generated.
    if doc.source == "package" and looks_generated(doc.text, s):
        return "generated"
    return None

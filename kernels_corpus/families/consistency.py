"""A family render's launch spec checked against the template instantiation it launches.

A seed-family kernel is a short text: an include, a launch spec, and an entry that instantiates a family
template (`wgmma_gemm<128, 256, 2, 3, ...>`, `MmaSyncGemm<MmaSyncTile<...>>`, `SkinnyNN<...>`). The
spec repeats what the template arguments fix: the threads of a block, the dynamic shared memory the
kernel lays out, the TMA boxes it expects, the cluster shape. A writer that pairs one variant's template
arguments with another variant's spec makes a kernel that launches with the wrong block or too little
shared memory; the harness then finds it wrong or crashed, after a compile and a launch.
`mismatch(text)` names the first field that disagrees with every family variant of the same
instantiation, so the caller can reject the text before any of that; an instantiation no family
renders (a new configuration) is not judged here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from hgemm.candidate import SpecError, parse_spec

from . import all_variants

# a template instantiation called in the entry's body: name<args>(...) or name<args>::run(...)
_CALL = re.compile(r"([A-Za-z_][\w:]*)\s*<([^;{}]*?)>\s*(?:::\s*run\s*)?\(")
_CLUSTER = re.compile(r"__cluster_dims__\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
# the shape whose launch variables evaluate the smem expression (the families' is a constant)
_ENV = {"M": 4096, "N": 4096, "K": 4096, "batch": 1, "num_sms": 132}


@dataclass(frozen=True)
class Fixed:
    """What a template instantiation fixes of its launch."""

    block: tuple[int, int, int]
    smem: int  # the least dynamic shared memory its kernel needs
    tensor_maps: tuple
    cluster: tuple[int, int, int]


def _cluster(text: str) -> tuple[int, int, int]:
    m = _CLUSTER.search(text)
    return tuple(int(g) for g in m.groups()) if m else (1, 1, 1)


def _instantiation(text: str, names: frozenset[str] | None = None) -> str | None:
    """The first call of a family template in the text, whitespace and namespaces dropped."""
    for m in _CALL.finditer(text):
        name = m.group(1).split("::")[-1]
        if names is None or name in names:
            return name + "<" + re.sub(r"\s+|hgemm::|sm90::", "", m.group(2)) + ">"
    return None


@functools.lru_cache(maxsize=1)
def _known() -> tuple[dict[str, list[Fixed]], frozenset[str]]:
    table: dict[str, list[Fixed]] = {}
    for _, text in all_variants():
        spec = parse_spec(text)
        key = _instantiation(text)
        fixed = Fixed(spec.block, spec.smem(_ENV), spec.tensor_maps, _cluster(text))
        if key and fixed not in table.setdefault(key, []):
            table[key].append(fixed)
    return table, frozenset(k.split("<")[0] for k in table)


def mismatch(text: str) -> str | None:
    """Why the text's launch spec cannot launch the family template it instantiates, or None (it fits
    one of the family's variants of that instantiation, or it instantiates none the families render,
    or its spec does not parse: the parser says so)."""
    table, names = _known()
    key = _instantiation(text, names)
    if key is None or key not in table:
        return None
    try:
        spec = parse_spec(text)
        smem = spec.smem(_ENV)
    except (SpecError, ValueError):
        return None
    known = table[key]
    checks = [
        ("block", lambda f: spec.block == f.block, lambda f: f"block {spec.block[0]}, the kernel's is {f.block[0]}"),
        ("smem", lambda f: smem >= f.smem, lambda f: f"smem {smem}, the kernel lays out {f.smem}"),
        ("tensor_map", lambda f: spec.tensor_maps == f.tensor_maps,
         lambda f: "tensor maps " + ("; ".join(t.render() for t in spec.tensor_maps) or "none")
                   + ", the kernel's " + ("; ".join(t.render() for t in f.tensor_maps) or "none")),
        ("__cluster_dims__", lambda f: _cluster(text) == f.cluster,
         lambda f: f"cluster {_cluster(text)}, the kernel's {f.cluster}"),
    ]
    candidates = known
    for field, ok, why in checks:
        fitting = [f for f in candidates if ok(f)]
        if not fitting:
            return f"launch spec does not fit {key}: {field}: {why(candidates[0])}"
        candidates = fitting
    return None


def judge_fitting(judge: Callable[[list[str], list], list[dict]], texts: list[str], problems: list) -> list[dict]:
    """judge(texts, problems)'s verdicts (hgemm.judge.KernelJudge.judge's form), except that a family
    render whose launch spec does not fit its template gets a `parse_error` verdict naming the field,
    without a compile or a launch, where it would launch with the wrong block or cluster, or hang. The
    RL rewards and the sample stage judge a model's kernels alike through it."""
    misfits = {i: why for i, t in enumerate(texts) if (why := mismatch(t))}
    rest = [i for i in range(len(texts)) if i not in misfits]
    judged = iter(judge([texts[i] for i in rest], [problems[i] for i in rest]) if rest else [])
    return [{"status": "parse_error", "error": misfits[i], "results": []} if i in misfits else next(judged)
            for i in range(len(texts))]

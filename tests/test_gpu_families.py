"""GPU: every seed family verifies on awkward shapes (1x1x1, K = 1, primes, M = 1, odd N, batch > 1)."""

from __future__ import annotations

import random

import pytest

from hgemm.entry import EvalOptions
from hgemm.judge import KernelJudge
from hgemm.problem import Problem

pytestmark = pytest.mark.gpu

EDGE = [Problem(1, 1, 1), Problem(1, 257, 33), Problem(17, 1, 1), Problem(127, 131, 137), Problem(1, 4096, 4096),
        Problem(63, 65, 129, 3), Problem(64, 1001, 256), Problem(256, 256, 4104), Problem(5, 3000, 2048)]


def sample(n_per_family: int, seed: int = 0) -> list[tuple[str, str]]:
    from kernels_corpus.families import FAMILIES

    picked = []
    rng = random.Random(seed)
    for fam in FAMILIES:
        params = fam.variants()
        # always include split-K variants: their reduction is the easiest part to get wrong
        split = [p for p in params if p.get("split_k", 1) > 1]
        chosen = rng.sample(params, min(n_per_family, len(params))) + split[:2]
        picked += [(fam.name(p), fam.render(p)) for p in chosen]
    return picked


@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_family_variants_verify_on_edge_shapes(layout):
    from hgemm.candidate import parse_spec

    variants = [(n, t) for n, t in sample(6) if layout in parse_spec(t).layouts]
    problems = [Problem(p.M, p.N, p.K, p.batch, layout) for p in EDGE]
    with KernelJudge(EvalOptions(timing=False)) as judge:
        verdicts = judge.judge([t for _, t in variants], [problems] * len(variants))
    failures = {}
    for (name, _), v in zip(variants, verdicts):
        bad = [(r["problem"], r["status"], r.get("error", "")[:300]) for r in v["results"] if r["status"] != "ok"]
        if v["status"] != "ok":
            failures[name] = bad or v.get("error")
    assert not failures, failures

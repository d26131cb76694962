"""Seed HGEMM kernel families: parameterised generators that render candidate texts.

Each family module exposes `variants() -> list[dict]`, `name(params) -> str`, `render(params) -> str`
(a complete candidate: CUDA C++ plus its /*@launch ... @*/ spec) and `applicable(params, problem)`.
See README.md in this folder for the design of each family.
"""

from __future__ import annotations

import random
from pathlib import Path

from . import batched_small, mma_sync, narrow, skinny, skinny_mma, small_k, small_k_mma, wgmma

FAMILIES = (mma_sync, skinny, batched_small, wgmma, narrow, small_k, skinny_mma, small_k_mma)


def all_params() -> list[tuple[object, dict]]:
    """(family module, params) for every variant of every family, in a fixed order."""
    return [(fam, p) for fam in FAMILIES for p in fam.variants()]


def all_variants() -> list[tuple[str, str]]:
    """(name, candidate text) for every variant of every family."""
    return [(fam.name(p), fam.render(p)) for fam, p in all_params()]


def sample_variants(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """A deterministic random sample of n variants (all of them when n >= the total), rendered."""
    pool = all_params()
    picks = random.Random(seed).sample(range(len(pool)), min(n, len(pool)))
    return [(pool[i][0].name(pool[i][1]), pool[i][0].render(pool[i][1])) for i in sorted(picks)]


def write_kernels(fam, params: list[dict], out: Path) -> list[str]:
    """Each variant's candidate text as OUT/NAME.cu, a folder `hgemm bench --kernels` times; the names."""
    out.mkdir(parents=True, exist_ok=True)
    for p in params:
        (out / f"{fam.name(p)}.cu").write_text(fam.render(p))
    return [fam.name(p) for p in params]

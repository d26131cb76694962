"""Seeded, log-uniform samples of GEMM shapes, written as grid files.

The hand-picked grids hold a few dozen shapes; a dispatch rule or a policy that only ever saw those has
not shown that it generalises. A sample draws every dimension log-uniformly over 1 ... 16384, half of
the draws rounded to a multiple of 64 and half made odd, both layouts, a share batched; draws are
kept until each kind (general, skinny, batched, small K, large K) holds its share of the sample. Shapes
above a work or memory cap are redrawn, so every sampled problem can be timed in a few milliseconds.
Keys listed in `exclude` (grid files) are never drawn: a held-out sample stays disjoint from the grids
that tune the library and prompt the policy.

    python -m hgemm.shape_sample --n 320 --seed 1 --out configs/grids/sample.yaml
    python -m hgemm.shape_sample --n 48 --seed 2 --exclude configs/grids/sample.yaml \\
        configs/grids/default.yaml --out configs/grids/heldout.yaml

With --split-every E, the same draw is split in two files: every E-th shape of each kind goes to
--heldout-out, the rest to --out. A dispatch rule is fitted on the first and judged on the second.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter

import yaml

from .files import atomic_write_text
from .problem import LAYOUTS, GridError, Problem, load_grid

DIM_MAX = 16384
MAX_FLOPS = 2 * 8192**3  # ~1.1 TFLOP: about 1.5 ms at the H200's dense fp16 rate
MAX_BYTES = 1 << 30  # A, B and C together; the timer keeps several such sets
BATCHED_SHARE = 0.25
# each kind's share of a sample: drawn freely, skinny shapes would be two thirds of it
KIND_SHARE = {"general": 0.3, "skinny": 0.25, "batched": 0.15, "small_k": 0.15, "large_k": 0.15}


def kind_of(problem: Problem) -> str:
    """The class a sampled shape reports under; the first rule that matches wins."""
    if problem.batch > 1:
        return "batched"
    if min(problem.M, problem.N) <= 64:
        return "skinny"
    if problem.K <= 256:
        return "small_k"
    if problem.K >= 4 * max(problem.M, problem.N):
        return "large_k"
    return "general"


def draw_dim(rng: random.Random, low: int = 1, high: int = DIM_MAX) -> int:
    """Log-uniform over [low, high]; half rounded to a multiple of 64 (at least 64), half odd."""
    x = math.exp(rng.uniform(math.log(low), math.log(high)))
    if rng.random() < 0.5:
        return min(high, max(64, round(x / 64) * 64))
    return min(high, int(x) | 1)


def draw_problem(rng: random.Random) -> Problem:
    batch = 1
    if rng.random() < BATCHED_SHARE:
        batch = max(2, round(math.exp(rng.uniform(math.log(2), math.log(256)))))
    m, n, k = (draw_dim(rng) for _ in range(3))
    layout = rng.choice(LAYOUTS)
    p = Problem(m, n, k, batch, layout)
    return Problem(m, n, k, batch, layout, kind_of(p))


def fits(p: Problem) -> bool:
    return p.flops <= MAX_FLOPS and p.min_bytes <= MAX_BYTES


def quotas(n: int) -> dict[str, int]:
    """How many shapes of each kind a sample of n holds: the shares, rounded, summing to n."""
    counts = {kind: math.floor(share * n) for kind, share in KIND_SHARE.items()}
    for kind in sorted(KIND_SHARE, key=lambda k: counts[k] - KIND_SHARE[k] * n)[: n - sum(counts.values())]:
        counts[kind] += 1
    return counts


def sample_shapes(n: int, seed: int, exclude: set[str] = frozenset()) -> list[Problem]:
    """n distinct problems, none of whose keys is in `exclude`, each kind holding its share."""
    if n < 1:
        raise ValueError(f"a sample needs at least one shape, got n={n}")
    rng = random.Random(seed)
    quota = quotas(n)
    chosen: dict[str, Problem] = {}
    counts: Counter = Counter()
    for _ in range(10_000 * n):
        if len(chosen) == n:
            break
        p = draw_problem(rng)
        if fits(p) and p.key not in exclude and p.key not in chosen and counts[p.shape_class] < quota[p.shape_class]:
            counts[p.shape_class] += 1
            chosen[p.key] = p
    if len(chosen) < n:
        raise RuntimeError(f"drew only {len(chosen)} of {n} shapes within the caps")
    return sorted(chosen.values(), key=lambda p: (p.shape_class, p.layout, p.key))


def split(problems: list[Problem], every: int) -> tuple[list[Problem], list[Problem]]:
    """(fit, held out): every `every`-th problem of each kind, in the sample's order, is held out."""
    if every < 2:
        raise ValueError(f"--split-every must be at least 2, got {every}")
    fit, held = [], []
    seen: Counter = Counter()
    for p in problems:
        (held if seen[p.shape_class] % every == every // 2 else fit).append(p)
        seen[p.shape_class] += 1
    return fit, held


def grid_text(problems: list[Problem], header: str) -> str:
    """A grid file: one group per class and layout, explicit [M, N, K, batch] shapes."""
    groups = []
    for cls, layout in sorted({(p.shape_class, p.layout) for p in problems}):
        shapes = [[p.M, p.N, p.K, p.batch] for p in problems if (p.shape_class, p.layout) == (cls, layout)]
        groups.append({"class": cls, "layouts": [layout], "shapes": shapes})
    body = yaml.safe_dump({"groups": groups}, default_flow_style=None, sort_keys=False, width=110)
    return "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines()) + body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.shape_sample", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True, help="number of shapes")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--exclude", nargs="*", default=[], help="grid files whose shapes are never drawn")
    ap.add_argument("--out", required=True, help="grid YAML to write (with --split-every: the fitting part)")
    ap.add_argument("--split-every", type=int, default=None, help="hold out every N-th shape of each kind")
    ap.add_argument("--heldout-out", default=None, help="grid YAML for the held-out part (with --split-every)")
    args = ap.parse_args(argv)
    if (args.split_every is None) != (args.heldout_out is None):
        print("error: --split-every and --heldout-out go together", file=sys.stderr)
        return 2
    try:
        exclude = {p.key for path in args.exclude for p in load_grid(path)}
        problems = sample_shapes(args.n, args.seed, exclude)
        parts = [(args.out, problems)]
        if args.split_every is not None:
            fit, held = split(problems, args.split_every)
            parts = [(args.out, fit), (args.heldout_out, held)]
    except (GridError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = " ".join(["python -m hgemm.shape_sample"] + (argv if argv is not None else sys.argv[1:]))
    for i, (path, chosen) in enumerate(parts):
        counts = Counter(p.shape_class for p in chosen)
        what = ("" if len(parts) == 1 else
                f"the {'held-out' if i else 'fitting'} part of a {len(problems)}-shape sample: ")
        header = (f"{what}{len(chosen)} shapes drawn log-uniformly over 1..{DIM_MAX} per dimension "
                  f"(hgemm/shape_sample.py), made by\n  {command}\n"
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        atomic_write_text(path, grid_text(chosen, header))
        print(f"{path}: {len(chosen)} shapes ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

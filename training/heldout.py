"""rl_hgemm's shapes: the held-out split of the grid, the training buckets, and heldout.json.

The grid (a grid YAML path or an inline grid) is split into held-out shapes (listed in the config,
plus a deterministic hash-based fraction) and training shapes; a held-out grid's shapes (`heldout_grid`,
e.g. configs/grids/heldout.yaml, disjoint from the training and tune grids) are held out as well. Held-out shapes are never prompted,
judged or shown as context in training; rl_hgemm writes them to heldout.json (`heldout_record`) and
the sample stage evaluates them (`heldout_problems` reads the file back). Training shapes are grouped
into buckets by shape class, layout and size (log2 of the cube root of M*N*K*batch); a completion is
judged on its prompt's shape and its nearest bucket mates.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from hgemm.problem import Problem, load_grid
from training.kerneldb import shape_distance


@dataclass
class ShapeSettings:
    """rl_hgemm's `shapes:` section (values: configs/default.yaml): the grid, the hold-out rule, the buckets."""

    grid: str | dict  # a grid YAML path, or an inline {groups: [...]}
    heldout_keys: list[str]  # problem keys always held out
    heldout_fraction: float  # plus this share of the grid, chosen by a hash of the key
    heldout_salt: str  # change it to draw a different held-out set
    heldout_grid: str | None  # a grid file whose shapes are all held out, besides those of the grid; null: none
    classes: list[str] | None  # train only these shape classes (null: all)
    max_gflop: float | None  # skip training shapes above this many GFLOP (keeps steps short); null: none
    shapes_per_reward: int  # the prompt's shape plus bucket mates it is also judged on
    repeats: int  # each training shape appears this many times per pass over the dataset
    heldout_eval: int  # held-out shapes judged every grpo.eval_steps steps (the held-out curve); 0: none


def is_heldout(problem: Problem, s: ShapeSettings) -> bool:
    """Deterministic: the same key, salt and fraction always give the same answer, on any machine."""
    if problem.key in s.heldout_keys:
        return True
    h = int.from_bytes(hashlib.sha256(f"{s.heldout_salt}:{problem.key}".encode()).digest()[:8], "big")
    return h / 2**64 < s.heldout_fraction


def bucket_of(problem: Problem) -> str:
    size = round(math.log2((problem.M * problem.N * problem.K * problem.batch) ** (1 / 3)))
    return f"{problem.shape_class}/{problem.layout}/s{size}"


def split_grid(s: ShapeSettings, root: Path = Path(".")) -> tuple[list[Problem], list[Problem]]:
    """(training shapes, held-out shapes). Held-out is decided over the whole grid, before the class
    and size filters, so it does not move when those change."""
    grid = s.grid if isinstance(s.grid, dict) else root / s.grid
    problems = load_grid(grid)
    unknown = set(s.heldout_keys) - {p.key for p in problems}
    if unknown:
        raise ValueError(f"rl_hgemm.shapes.heldout_keys: not in the grid: {sorted(unknown)}")
    heldout = [p for p in problems if is_heldout(p, s)]
    if s.heldout_grid:
        keys = {p.key for p in heldout}
        heldout += [p for p in load_grid(root / s.heldout_grid) if p.key not in keys]
    held_keys = {p.key for p in heldout}
    train = [p for p in problems if p.key not in held_keys
             and (s.classes is None or p.shape_class in s.classes)
             and (s.max_gflop is None or p.flops / 1e9 <= s.max_gflop)]
    if not train:
        raise ValueError("rl_hgemm.shapes leaves no training shape (hold-out, classes and max_gflop took them all)")
    return train, heldout


def buckets(train: list[Problem]) -> dict[str, list[Problem]]:
    out: dict[str, list[Problem]] = {}
    for p in train:
        out.setdefault(bucket_of(p), []).append(p)
    return out


def reward_shapes(problem: Problem, bucket: list[Problem], n: int) -> list[Problem]:
    """The prompt's shape first, then its nearest bucket mates: a kernel is rewarded for being fast
    across its bucket, not on one shape."""
    mates = sorted((p for p in bucket if p != problem), key=lambda p: (shape_distance(problem, p.key), p.key))
    return [problem] + mates[: max(0, n - 1)]


def heldout_record(s: ShapeSettings, train: list[Problem], heldout: list[Problem]) -> dict:
    """What heldout.json holds: the rule, the held-out shapes and the training shapes with their buckets."""
    return {
        "rule": {"keys": s.heldout_keys, "fraction": s.heldout_fraction, "salt": s.heldout_salt,
                 "grid": s.heldout_grid},
        "heldout": [p.to_dict() | {"key": p.key} for p in heldout],
        "train": [p.to_dict() | {"key": p.key, "bucket": bucket_of(p)} for p in train],
    }


def heldout_problems(path: str | Path | None) -> list[Problem]:
    """Shapes named in rl_hgemm's heldout.json: its `heldout` entry when it has one (the file lists
    the training shapes too), else the whole file; problem dicts ({M, N, K, ...}) or problem keys
    ("b1_m4096_n4096_k4096_NN"), at any depth."""
    if not path or not Path(path).exists():
        return []
    found: dict[str, Problem] = {}

    def walk(node, cls: str = "heldout"):
        if isinstance(node, dict):
            if {"M", "N", "K"} <= set(node):
                p = Problem.from_dict({"shape_class": cls, **node})
                found[p.key] = p  # a full problem dict knows its shape class: it wins over a bare key
                return
            for key, value in node.items():
                if isinstance(key, str) and _is_key(key):
                    found.setdefault(key, Problem.from_key(key, cls))
                walk(value, cls)
        elif isinstance(node, list):
            for item in node:
                walk(item, cls)
        elif isinstance(node, str) and _is_key(node):
            found.setdefault(node, Problem.from_key(node, cls))

    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and "heldout" in data:
        data = data["heldout"]  # rl_hgemm also lists its training shapes beside them: never those
    walk(data)
    return list(found.values())


def _is_key(text: str) -> bool:
    try:
        Problem.from_key(text)
        return True
    except (ValueError, IndexError):
        return False

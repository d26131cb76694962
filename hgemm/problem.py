"""GEMM problems and the size/batch grids they are drawn from.

A problem is C[b] = A[b] @ B[b] for b in range(batch), fp16 inputs, fp32 accumulation, fp16 output,
all tensors contiguous and row-major:

    A: batch x M x K
    B: batch x K x N   (layout "NN")   or   batch x N x K   (layout "TN", i.e. B given transposed)
    C: batch x M x N

Grids are written in YAML (see configs/grids/default.yaml) as a list of groups; each group is either
explicit shapes or the cartesian product of value lists, and carries a class name that the reports
group by.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

LAYOUTS = ("NN", "TN")


@dataclass(frozen=True, order=True)
class Problem:
    M: int
    N: int
    K: int
    batch: int = 1
    layout: str = "NN"
    shape_class: str = "adhoc"

    def __post_init__(self):
        for name in ("M", "N", "K", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"problem field {name} must be a positive integer, got {value!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"problem field layout must be one of {LAYOUTS}, got {self.layout!r}")

    @property
    def key(self) -> str:
        """Stable short name, used as a dictionary key in result files and the dispatch table."""
        return f"b{self.batch}_m{self.M}_n{self.N}_k{self.K}_{self.layout}"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.M * self.N * self.K

    @property
    def min_bytes(self) -> int:
        """Fewest bytes a GEMM must move through device memory: each input read once, C written once."""
        return 2 * self.batch * (self.M * self.K + self.K * self.N + self.M * self.N)

    @property
    def a_shape(self) -> tuple[int, int, int]:
        return (self.batch, self.M, self.K)

    @property
    def b_shape(self) -> tuple[int, int, int]:
        return (self.batch, self.K, self.N) if self.layout == "NN" else (self.batch, self.N, self.K)

    @property
    def c_shape(self) -> tuple[int, int, int]:
        return (self.batch, self.M, self.N)

    def variables(self) -> dict[str, int]:
        """The names a launch spec's expressions may use (num_sms is added by the runner)."""
        return {"M": self.M, "N": self.N, "K": self.K, "batch": self.batch}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        return cls(**{k: d[k] for k in ("M", "N", "K", "batch", "layout", "shape_class") if k in d})

    @classmethod
    def from_key(cls, key: str, shape_class: str = "adhoc") -> "Problem":
        b, m, n, k, layout = key.split("_")
        return cls(int(m[1:]), int(n[1:]), int(k[1:]), int(b[1:]), layout, shape_class)


@dataclass(frozen=True)
class TaskProblem:
    """One size of a general kernel task (kernels_corpus.tasks): evaluated like a GEMM problem, with the
    task's own ABI, inputs, reference and torch baseline."""

    task: str
    sizes: tuple[tuple[str, int], ...]
    shape_class: str = "task"
    layout: str = "NN"  # tasks have one compiled variant; the key the pool uses to find it

    @classmethod
    def of(cls, task: str, sizes: dict) -> "TaskProblem":
        return cls(task, tuple(sorted(sizes.items())))

    @property
    def key(self) -> str:
        return self.task + "_" + "_".join(f"{k}{v}" for k, v in self.sizes)

    def variables(self) -> dict:
        return dict(self.sizes)

    def to_dict(self) -> dict:
        return {"task": self.task, "sizes": dict(self.sizes), "shape_class": self.shape_class, "layout": self.layout}


def _as_list(value, field: str, group: str) -> list:
    if isinstance(value, list):
        return value
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict) and set(value) >= {"start", "stop"}:
        # geometric ranges ("start: 128, stop: 16384, factor: 2") keep YAML grids short
        out, x, factor = [], int(value["start"]), int(value.get("factor", 2))
        while x <= int(value["stop"]):
            out.append(x)
            x *= factor
        return out
    raise ValueError(f"grid group {group!r}: field {field} must be an int, a list or a start/stop range")


def expand_group(group: dict) -> list[Problem]:
    """One YAML group to problems.

    Forms:
      {class: C, shapes: [[M, N, K], [M, N, K, batch], ...]}
      {class: C, M: [...], N: [...], K: [...], batch: [...]}     cartesian product
      {class: C, cube: [...]}                                     M = N = K
    Each may add `layouts: [NN, TN]` (default [NN]) and `batch` (default 1).
    """
    name = group.get("class", "adhoc")
    layouts = group.get("layouts", ["NN"])
    batches = _as_list(group.get("batch", 1), "batch", name)
    shapes: list[tuple[int, int, int, int]] = []
    if "shapes" in group:
        for s in group["shapes"]:
            if len(s) == 3:
                shapes.extend((s[0], s[1], s[2], b) for b in batches)
            elif len(s) == 4:
                shapes.append(tuple(s))
            else:
                raise ValueError(f"grid group {name!r}: each shape is [M, N, K] or [M, N, K, batch], got {s}")
    elif "cube" in group:
        shapes = [(x, x, x, b) for x in _as_list(group["cube"], "cube", name) for b in batches]
    else:
        missing = [f for f in ("M", "N", "K") if f not in group]
        if missing:
            raise ValueError(f"grid group {name!r}: missing field(s) {missing} (or give 'shapes' or 'cube')")
        dims = [_as_list(group[f], f, name) for f in ("M", "N", "K")]
        shapes = [(m, n, k, b) for m, n, k in itertools.product(*dims) for b in batches]
    return [Problem(m, n, k, b, layout, name) for (m, n, k, b) in shapes for layout in layouts]


def load_grid(path_or_dict) -> list[Problem]:
    """Problems of a grid file (or an already-loaded dict), deduplicated, in file order."""
    data = path_or_dict
    if not isinstance(data, dict):
        data = yaml.safe_load(Path(path_or_dict).read_text())
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups:
        raise ValueError("a grid needs a non-empty 'groups' list")
    seen: dict[tuple, Problem] = {}
    for group in groups:
        for p in expand_group(group):
            seen.setdefault((p.M, p.N, p.K, p.batch, p.layout), p)
    return list(seen.values())

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

import yaml

from .files import UnreadableFile, read_user_text

LAYOUTS = ("NN", "TN")
# The H200's SMs: what shortlists and applicability rules assume of the target (the GPU decides)
NUM_SMS = 132


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


class GridError(ValueError):
    """A grid file (or inline grid) a user wrote is unusable; the message names the file and the group."""


GROUP_KEYS = ("class", "layouts", "batch", "shapes", "cube", "M", "N", "K")


def _range(value: dict, field: str, group: str) -> list[int]:
    # geometric ranges ("start: 128, stop: 16384, factor: 2") keep YAML grids short; a factor below 2
    # or a start below 1 would never pass stop, so they are refused rather than looped on
    unknown = sorted(set(value) - {"start", "stop", "factor"})
    if unknown:
        raise GridError(f"grid group {group!r}: field {field}: unknown range key(s) {unknown} "
                        "(a range is start, stop, factor)")
    start, stop, factor = value["start"], value["stop"], value.get("factor", 2)
    for key, x, least in (("start", start, 1), ("stop", stop, 1), ("factor", factor, 2)):
        if not isinstance(x, int) or isinstance(x, bool) or x < least:
            raise GridError(f"grid group {group!r}: field {field}: range {key} must be an integer >= {least}, "
                            f"got {x!r}")
    if stop < start:
        raise GridError(f"grid group {group!r}: field {field}: range start {start} > stop {stop} selects nothing")
    out, x = [], start
    while x <= stop:
        out.append(x)
        x *= factor
    return out


def _as_list(value, field: str, group: str) -> list:
    if isinstance(value, list):
        if not value:
            raise GridError(f"grid group {group!r}: field {field} is an empty list")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, dict) and set(value) >= {"start", "stop"}:
        return _range(value, field, group)
    raise GridError(f"grid group {group!r}: field {field} must be an int, a list or a start/stop range, got {value!r}")


def expand_group(group: dict) -> list[Problem]:
    """One YAML group to problems.

    Forms:
      {class: C, shapes: [[M, N, K], [M, N, K, batch], ...]}
      {class: C, M: [...], N: [...], K: [...], batch: [...]}     cartesian product
      {class: C, cube: [...]}                                     M = N = K
    Each may add `layouts: [NN, TN]` (default [NN]) and `batch` (default 1).
    """
    if not isinstance(group, dict):
        raise GridError(f"each grid group is a mapping (class, shapes/cube/M N K, ...), got {group!r}")
    name = group.get("class", "adhoc")
    unknown = sorted(set(group) - set(GROUP_KEYS))
    if unknown:
        raise GridError(f"grid group {name!r}: unknown field(s) {unknown} (known: {', '.join(GROUP_KEYS)})")
    layouts = group.get("layouts", ["NN"])
    if not isinstance(layouts, list) or not layouts or any(x not in LAYOUTS for x in layouts):
        raise GridError(f"grid group {name!r}: layouts must be a non-empty list of {LAYOUTS}, got {layouts!r}")
    batches = _as_list(group.get("batch", 1), "batch", name)
    shapes: list[tuple[int, int, int, int]] = []
    if "shapes" in group:
        if not isinstance(group["shapes"], list) or not group["shapes"]:
            raise GridError(f"grid group {name!r}: shapes must be a non-empty list, got {group['shapes']!r}")
        for s in group["shapes"]:
            if isinstance(s, list) and len(s) == 3:
                shapes.extend((s[0], s[1], s[2], b) for b in batches)
            elif isinstance(s, list) and len(s) == 4:
                shapes.append(tuple(s))
            else:
                raise GridError(f"grid group {name!r}: each shape is [M, N, K] or [M, N, K, batch], got {s}")
    elif "cube" in group:
        shapes = [(x, x, x, b) for x in _as_list(group["cube"], "cube", name) for b in batches]
    else:
        missing = [f for f in ("M", "N", "K") if f not in group]
        if missing:
            raise GridError(f"grid group {name!r}: missing field(s) {missing} (or give 'shapes' or 'cube')")
        dims = [_as_list(group[f], f, name) for f in ("M", "N", "K")]
        shapes = [(m, n, k, b) for m, n, k in itertools.product(*dims) for b in batches]
    try:
        return [Problem(m, n, k, b, layout, name) for (m, n, k, b) in shapes for layout in layouts]
    except ValueError as e:
        raise GridError(f"grid group {name!r}: {e}") from None


def _read_grid(path) -> dict:
    """The YAML mapping of a grid file; every way a file can be unusable is a GridError naming it."""
    try:
        text = read_user_text(path, "grid file")
    except UnreadableFile as e:
        raise GridError(str(e)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise GridError(f"{path}: {yaml_error(e)}") from None
    if not isinstance(data, dict):
        raise GridError(f"{path}: a grid is a mapping with a non-empty 'groups' list"
                        + (" (the file is empty)" if data is None else f", got {type(data).__name__}"))
    return data


def yaml_error(e: "yaml.YAMLError") -> str:
    """A YAML parse error as one line: where (1-based line and column) and what."""
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"YAML syntax error at {where}{what}"


def load_grid(path_or_dict) -> list[Problem]:
    """Problems of a grid file (or an already-loaded dict), deduplicated, in file order. A bad grid is a
    GridError whose message starts with the file's name."""
    if isinstance(path_or_dict, dict):
        data, where = path_or_dict, "inline grid"
    else:
        data, where = _read_grid(path_or_dict), str(path_or_dict)
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups:
        raise GridError(f"{where}: a grid needs a non-empty 'groups' list")
    unknown = sorted(set(data) - {"groups"})
    if unknown:
        raise GridError(f"{where}: unknown top-level key(s) {unknown} (a grid has only 'groups')")
    seen: dict[tuple, Problem] = {}
    for group in groups:
        try:
            problems = expand_group(group)
        except GridError as e:
            raise GridError(f"{where}: {e}") from None
        for p in problems:
            seen.setdefault((p.M, p.N, p.K, p.batch, p.layout), p)
    return list(seen.values())


def select_problems(problems: list[Problem], classes=None, limit: int | None = None,
                    where: str = "grid") -> list[Problem]:
    """The problems of the given shape classes (None or empty: all), then the first `limit` (None or 0:
    all). A class the grid lacks is a GridError rather than a quiet run over fewer (or no) shapes."""
    if classes:
        known = sorted({p.shape_class for p in problems})
        missing = [c for c in classes if c not in known]
        if missing:
            raise GridError(f"{where}: no shape class {', '.join(map(repr, missing))} (classes: {', '.join(known)})")
        problems = [p for p in problems if p.shape_class in classes]
    if limit:
        problems = problems[:limit]
    return problems

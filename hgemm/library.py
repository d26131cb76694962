"""The tuned kernel library: a dispatch table from shape to the fastest verified kernel (`hgemm.matmul`,
in hgemm/ops.py, launches it).

Lookup order for a problem: the exact shape in the table; else a kernel chosen from the tuned shapes
of the same layout, among the seed families' entries (a model's kernel serves only the shape it was
verified and timed on); else the safe generic kernel (the table's fallback). The table's `dispatch`
says how an unseen shape is served:
- `cost` (DEFAULT_DISPATCH, what a tune, merge or copy writes): every kernel a tuned shape offers
  (`offered`: its winner, and the seed-family kernels its tune timed within RUNNER_UP_SLOWDOWN of the
  winner's time, RUNNER_UPS of them at most) that fits the shape is ranked by hgemm.cost's model,
  fitted to every time the entries' tunes measured (`timed`) and corrected by the kernel's
  measured-over-modelled ratio on the NEIGHBOURS nearest tuned shapes; the lowest estimate wins. Where
  no kernel has an estimate it is `measured`;
- `measured`: every tuned winner that fits the shape is scored by
  its measured slowdown against each of the NEIGHBOURS nearest tuned shapes' winners (alignment-aware
  distance, weighted by 1 / (1 + distance); a neighbour whose tune did not time it counts
  UNTIMED_SLOWDOWN), from the entries' `timed` ratios; the lowest score wins. Where no neighbour has
  timings it is `nearest`;
- `nearest` (a table without the key): the kernel of the nearest tuned shape (distance in log M, N, K,
  batch) that supports the shape.
hgemm.dispatch_eval compares the rules offline, each tuned shape left out in turn. Every family kernel
is correct for any M, N, K (predicated edge tiles), so a kernel chosen for another shape is slower at
worst, never wrong; its launch spec is still checked against the shape before it is used.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from .candidate import Candidate, SpecError, parse_candidate
from .cost import CostModel, family_text, kernel_params
from .files import read_user_text
from .params import operand_shape
from .problem import Problem
from .summary import BESIDE

# the pipeline's final library (stages.library: the tuned one with the model's winning kernels)
DEFAULT_LIBRARY = Path(__file__).resolve().parent.parent / "results" / "library"


@dataclass(frozen=True)
class Choice:
    name: str
    candidate: Candidate
    how: str  # "exact", "cost <nearest key>", "measured <nearest key>", "nearest <key>" or "fallback"


DISPATCH_RULES = ("cost", "measured", "nearest")
DEFAULT_DISPATCH = "cost"  # what a tune, merge or copy writes
NEIGHBOURS = 8  # tuned shapes the measured rule averages over
ALIGN_PENALTY = 1.0  # in log2 units of distance: as far as a factor 2 in one dimension
UNTIMED_SLOWDOWN = 1.3  # what the measured rule assumes of a kernel a neighbour's tune did not time
# Besides its winner, a tuned shape offers the cost rule the seed-family kernels its tune timed within
# 10% of the winner's time, the 2 fastest such: a kernel that won a single shape is then still ranked
# where that shape is not tuned (in hgemm.dispatch_eval's leave-one-out over the three committed tunes,
# the cost rule's pick 1.038x the winner's time in geomean with winners alone, 1.027x with these;
# worst 5.87x -> 2.56x: benchmarks/dispatch/README.md). They are renders of the families, kept by name.
RUNNER_UPS = 2
RUNNER_UP_SLOWDOWN = 1.10
# entries that serve their own shape only: a model's kernel (verified on its shape alone) and a pinned
# choice (pin_library), which is a dispatch result, not a measurement to dispatch others from
EXACT_ONLY_SOURCES = ("model", "pinned")


def log_distance(a: Problem, b: Problem) -> float:
    """Distance between two shapes in log2 M, N, K and batch: the nearest rule's notion of nearest."""
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2
                         for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K), (a.batch, b.batch))))


def _alignment(p: Problem) -> tuple[bool, bool, bool]:
    """Whether A's rows are 16-byte aligned (TMA's condition), whether B's are, and whether every
    operand's rows are 128-byte multiples. The kernels that win differ across each: an operand TMA
    refuses is read from a staged copy, and which one it is decides which staged kernel fits."""
    pitches = [operand_shape(op, p)[2] for op in "AB"]
    return pitches[0] % 8 == 0, pitches[1] % 8 == 0, all(x % 64 == 0 for x in pitches)


def aligned_distance(a: Problem, b: Problem) -> float:
    """log_distance plus ALIGN_PENALTY for each of _alignment's conditions on which the shapes differ."""
    return log_distance(a, b) + ALIGN_PENALTY * sum(x != y for x, y in zip(_alignment(a), _alignment(b)))


def measured_pick(near: list[tuple[float, dict[str, float]]], names, fits) -> str | None:
    """The measured rule: of `names` (kernels that won some tuned shape) those that `fits`, the one with
    the lowest distance-weighted mean log slowdown over `near` ((distance, {kernel: its time over that
    shape's winner's}) of the nearest tuned shapes); None if none fits."""
    weights = [1 / (1 + d) for d, _ in near]
    best, best_score = None, math.inf
    for name in names:
        if not fits(name):
            continue
        # a neighbour whose tune did not time the kernel (its estimate ranked it out) counts as
        # UNTIMED_SLOWDOWN, so a kernel timed once, and fast there, does not win on luck
        logs = [math.log(timed[name] if name in timed else UNTIMED_SLOWDOWN) for _, timed in near]
        score = sum(w * x for w, x in zip(weights, logs)) / sum(weights)
        if score < best_score - 1e-9:
            best, best_score = name, score
    return best


def timed_ratios(candidates: dict[str, dict], winner_us: float) -> dict[str, float]:
    """What a tune timed on one shape ({name: result} of its bench record): each verified kernel's time
    over the winner's, a kernel timed `beside:` under its own name."""
    return {name.removeprefix(BESIDE): round(r["time_us"] / winner_us, 4) for name, r in candidates.items()
            if r.get("status") == "ok" and r.get("time_us")}


def offered(winner: str, ratios: dict[str, float]) -> list[str]:
    """The kernels a tuned shape offers the cost rule: its winner, then the seed-family kernels its tune
    timed at most RUNNER_UP_SLOWDOWN times the winner's time, the RUNNER_UPS fastest of them (ratios:
    each timed kernel's time over the winner's)."""
    runners = sorted((r, n) for n, r in ratios.items()
                     if n != winner and r <= RUNNER_UP_SLOWDOWN and kernel_params(n) is not None)
    return [winner] + [n for _, n in runners[:RUNNER_UPS]]


def attach_timed(entries: dict[str, dict], results: dict | None) -> None:
    """Give every entry without `timed` the ratios its tune measured (results: the tune's bench.json)."""
    for pr in (results or {}).get("problems", []):
        entry = entries.get(Problem.from_dict(pr["problem"]).key)
        if entry is not None and "timed" not in entry and entry.get("time_us"):
            entry["timed"] = timed_ratios(pr.get("candidates", {}), entry["time_us"])


class Library:
    def __init__(self, path: str | Path = DEFAULT_LIBRARY):
        self.path = Path(path)
        table = json.loads((self.path / "table.json").read_text())
        self.entries: dict[str, dict] = table.get("entries", {})
        self.fallback: str = table["fallback"]
        self.dispatch: str = table.get("dispatch", "nearest")
        self.autotune: int = int(table.get("autotune", 0))  # hgemm.autotune's search width; 0: none
        if self.dispatch not in DISPATCH_RULES:
            raise ValueError(f"{self.path}: dispatch {self.dispatch!r} is not one of {', '.join(DISPATCH_RULES)}")
        self._candidates: dict[str, Candidate] = {}
        self._cost: CostModel | None = None

    def without(self, keys) -> Library:
        """This library less the entries of `keys`: neither chosen, nor a neighbour, nor in the cost fit."""
        lib, left_out = copy.copy(self), set(keys)
        lib.entries = {k: e for k, e in self.entries.items() if k not in left_out}
        lib._cost = None
        return lib

    def cost_model(self) -> CostModel:
        """hgemm.cost's model fitted to every kernel time the entries' tunes measured (fitted once)."""
        if self._cost is None:
            self._cost = CostModel({key: {name: ratio * e["time_us"] for name, ratio in e["timed"].items()}
                                    for key, e in self.entries.items() if e.get("timed") and e.get("time_us")})
        return self._cost

    def candidate(self, name: str) -> Candidate:
        """The kernel as the library stores it, or, for a runner-up the cost rule ranks (`offered`), as
        its family renders it."""
        if name not in self._candidates:
            self._candidates[name] = parse_candidate(stored_text(self.path, name))
        return self._candidates[name]

    def served(self) -> dict[str, str]:
        """name -> text of every kernel the library can serve: the files under kernels/ (winners, the
        fallback, the reference kernels the tunes timed) and the runner-ups the cost rule ranks."""
        names = {f.stem for f in (self.path / "kernels").glob("*.cu")}
        names |= {n for e in self.entries.values() for n in offered(e["kernel"], e.get("timed") or {})}
        return {name: stored_text(self.path, name) for name in sorted(names)}

    def _family(self, problem: Problem) -> list[str]:
        """The tuned shapes that dispatch other shapes of the problem's layout."""
        return [k for k, e in self.entries.items()
                if k.endswith("_" + problem.layout) and e.get("source") not in EXACT_ONLY_SOURCES]

    def neighbours(self, problem: Problem) -> list[tuple[float, str]]:
        """The NEIGHBOURS tuned shapes nearest the problem (aligned_distance, key): what the cost and
        measured rules read."""
        return sorted((aligned_distance(problem, Problem.from_key(k)), k) for k in self._family(problem))[:NEIGHBOURS]

    def lookup(self, problem: Problem) -> Choice:
        entry = self.entries.get(problem.key)
        if entry and runs_on(self.candidate(entry["kernel"]), problem):
            return Choice(entry["kernel"], self.candidate(entry["kernel"]), "exact")
        family = self._family(problem)
        near = self.neighbours(problem) if self.dispatch in ("cost", "measured") else []
        if self.dispatch == "cost":
            names = sorted({n for k in family for n in offered(self.entries[k]["kernel"], self.entries[k].get("timed") or {})})
            name = self.cost_model().pick([n for n in names if runs_on(self.candidate(n), problem)], problem, near)
            if name:
                return Choice(name, self.candidate(name), f"cost {near[0][1]}")
        if self.dispatch in ("cost", "measured"):
            timed = [(d, self.entries[k]["timed"]) for d, k in near if self.entries[k].get("timed")]
            if timed:
                # the kernels the neighbours' tunes timed that won some tuned shape (their texts are here)
                winners = {self.entries[k]["kernel"] for k in family}
                names = [n for n in dict.fromkeys(n for _, t in timed for n in t) if n in winners]
                name = measured_pick(timed, names, lambda n: runs_on(self.candidate(n), problem))
                if name:
                    return Choice(name, self.candidate(name), f"measured {near[0][1]}")
        tuned = sorted((log_distance(problem, Problem.from_key(k)), k) for k in family)
        for _, key in tuned:
            name = self.entries[key]["kernel"]
            if runs_on(self.candidate(name), problem):
                return Choice(name, self.candidate(name), f"nearest {key}")
        return Choice(self.fallback, self.candidate(self.fallback), "fallback")

    def measured(self) -> dict[str, list[tuple[str, float]]]:
        """problem key -> [(kernel text, speedup over the strongest baseline), ...], fastest first: the
        tuned winner and the reference kernels the tune timed on that shape (the entry's `references`).
        A kernel whose file is missing or whose speedup was not measured is left out."""
        out = {}
        for key, entry in self.entries.items():
            timed = {entry.get("kernel"): entry.get("speedup_vs_best")} | (entry.get("references") or {})
            kernels = [((self.path / "kernels" / f"{name}.cu").read_text(), float(speedup))
                       for name, speedup in timed.items()
                       if isinstance(speedup, (int, float)) and speedup > 0
                       and (self.path / "kernels" / f"{name}.cu").is_file()]
            if kernels:
                out[key] = sorted(kernels, key=lambda ts: -ts[1])
        return out


def tune_results(folder: str | Path) -> dict | None:
    """A tune folder's results file (bench.json, or bench.json.gz as committed when large), or None."""
    for name in ("bench.json", "bench.json.gz"):
        if (Path(folder) / name).is_file():
            return json.loads(read_user_text(Path(folder) / name))
    return None


def measured_kernels(folder: str | Path | None) -> dict[str, list[tuple[str, float]]]:
    """Library(folder).measured(), or {} for no folder or a folder without a table.json."""
    library = dispatch_library(folder)
    return library.measured() if library else {}


def dispatch_library(folder: str | Path | None) -> Library | None:
    """Library(folder), or None for no folder or a folder without a table.json."""
    if not folder or not (Path(folder) / "table.json").is_file():
        return None
    return Library(folder)


def runs_on(cand: Candidate, problem: Problem) -> bool:
    """Whether a kernel can run a problem at all: its layout, TMA's row alignment, and a launch its
    spec can compute (the harness would call it `unsupported` or a launch error otherwise)."""
    if not cand.supports(problem.layout) or not tma_compatible(cand, problem):
        return False
    try:
        cand.spec.launch_dims(problem.variables() | {"num_sms": 132})
    except SpecError:
        return False
    return True


def tma_compatible(cand: Candidate, problem: Problem) -> bool:
    """TMA needs every described operand's row pitch to be a multiple of 16 bytes (8 fp16); a staged
    operand is read from a padded copy, whose pitch always is."""
    return all(t.staged or operand_shape(t.operand, problem)[2] % 8 == 0 for t in cand.spec.tensor_maps)


def write_kernels(out_dir: Path, texts: dict[str, str]) -> None:
    """out_dir/kernels/ holding exactly these kernel texts (by name): a kernel an earlier write left and
    this one does not name is removed, so the folder never serves a kernel its table does not."""
    folder = out_dir / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.cu").write_text(text)
    for stale in folder.glob("*.cu"):
        if stale.stem not in texts:
            stale.unlink()


def merge_libraries(folders: list[str | Path], out_dir: str | Path, dispatch: str = DEFAULT_DISPATCH,
                    results: list[dict | None] | None = None, autotune: int = 0) -> dict:
    """One library from several tune folders: every tuned shape of any of them, and where two tuned the
    same shape, the entry with the higher speedup over its run's strongest baseline (each run measures
    its own baselines, so the ratio, not the time, is compared); each entry says which folder it came
    from (`from`) and what its tune timed on its shape (`timed`, from the folder's bench.json where it has
    one), and unseen shapes go by `dispatch`. The fallback, the environment and the arch are the first
    folder's. `results`: the folders' tune results where the caller has read them already (else read
    here). `autotune`: how many of the cost model's kernels hgemm.matmul times beside the dispatch rule's
    pick at the first call on a shape without an entry (0: none; hgemm.autotune). Writes table.json and kernels/ (the entries' kernels, their timed reference kernels and the fallback; nothing else)
    under out_dir; returns the table."""
    if not folders:
        raise ValueError("merge needs at least one library folder")
    out = Path(out_dir)
    tables = [(Path(f), json.loads((Path(f) / "table.json").read_text())) for f in folders]
    entries: dict[str, dict] = {}
    for folder, table in tables:
        for key, entry in table.get("entries", {}).items():
            kept = entries.get(key)
            if kept is None or (entry.get("speedup_vs_best") or 0) > (kept.get("speedup_vs_best") or 0):
                entries[key] = dict(entry, **{"from": str(folder)})
    first_folder, first = tables[0]
    for i, (folder, _) in enumerate(tables):
        attach_timed({k: e for k, e in entries.items() if e["from"] == str(folder)},
                     results[i] if results is not None else tune_results(folder))
    merged = {"arch": first.get("arch"), "gpu_run": first.get("gpu_run"), "env": first.get("env"),
              "entries": dict(sorted(entries.items())), "fallback": first["fallback"], "dispatch": dispatch,
              "merged_from": [str(f) for f, _ in tables],
              "pending": sorted({k for _, t in tables for k in t.get("pending", [])} - set(entries))}
    texts: dict[str, str] = {}

    def take(folder: Path, name: str, required: bool = True) -> None:
        path = folder / "kernels" / f"{name}.cu"
        if not required and not path.is_file():
            return  # a reference kernel the folder did not keep: Library.measured leaves it out too
        text = path.read_text()
        if texts.setdefault(name, text) != text:
            raise ValueError(f"two libraries hold different kernels named {name}")

    for e in entries.values():
        take(Path(e["from"]), e["kernel"])
        for name in e.get("references") or {}:
            take(Path(e["from"]), name, required=False)
    take(first_folder, first["fallback"])
    write_kernels(out, texts)
    (out / "table.json").write_text(json.dumps(merged, indent=1))
    return set_autotune(out, autotune)


def owned_entries(results: dict, margin: float) -> dict[str, dict]:
    """The shapes a bench stage run (contenders `model` and `library`, timed in one run) gives to the
    model: where its verified kernel, not the library's own, took at most 1 / margin of the library
    kernel's time. problem key -> table entry (kernel named model_<key>, times and speedups from that run)."""
    owned = {}
    for pr in results.get("problems", []):
        c = pr.get("candidates", {})
        model, lib = c.get("model", {}), c.get("library", {})
        if not (model.get("status") == "ok" and lib.get("status") == "ok" and model.get("time_us") and lib.get("time_us")):
            continue
        if lib["time_us"] / model["time_us"] < margin or (pr.get("kernels") or {}).get("model_is_library_kernel"):
            continue  # not faster by the margin, or the library's own kernel written out again
        problem = Problem.from_dict(pr["problem"])
        owned[problem.key] = {"kernel": f"model_{problem.key}", "time_us": model["time_us"], "tflops": model.get("tflops"),
                              "speedup_vs_best": model.get("speedup_vs_best"),
                              "speedup_vs_cublas": model.get("speedup_vs_cublas"),
                              "best_baseline": pr.get("best_baseline"), "shape_class": problem.shape_class,
                              "speedup_vs_library": lib["time_us"] / model["time_us"],
                              "library_kernel": (pr.get("kernels") or {}).get("library"), "source": "model"}
    return owned


def stored_text(folder: Path, name: str) -> str:
    """A library kernel's text: its file, or for a runner-up the cost rule ranks (`offered`), its family's
    render."""
    path = folder / "kernels" / f"{name}.cu"
    text = family_text(name) if not path.is_file() else None
    return text if text is not None else path.read_text()


# Launch-spec lines a family's render may gain without a change to the kernel's code: a workspace the
# kernel leaves zero (`workspace_zero: kept`) is filled once, not before every launch.
CODE_NEUTRAL_SPEC_LINES = ("workspace_zero: kept",)


def stale_launch_specs(folder: str | Path) -> dict[str, str]:
    """The stored seed-family kernels of a library folder whose text is their family's current render
    less a CODE_NEUTRAL_SPEC_LINES line (the same kernel code, launched another way): name -> the
    render. Kernels whose code differs from the current render are left out: they stay as tuned."""
    def neutral(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if line.strip() not in CODE_NEUTRAL_SPEC_LINES)

    stale = {}
    for path in sorted((Path(folder) / "kernels").glob("*.cu")):
        render, stored = family_text(path.stem), path.read_text()
        if render is not None and render != stored and neutral(render) == neutral(stored):
            stale[path.stem] = render
    return stale


def refresh_launch_specs(folder: str | Path) -> list[str]:
    """Rewrite a library folder's stale_launch_specs with their family's render, so that they launch as
    the family now launches them (`hgemm refresh`). Returns the names rewritten."""
    stale = stale_launch_specs(folder)
    for name, render in stale.items():
        (Path(folder) / "kernels" / f"{name}.cu").write_text(render)
    return list(stale)


def write_with_entries(base: str | Path, entries: dict[str, dict], kernels: dict[str, str], out_dir: str | Path) -> dict:
    """A copy of the library `base` (table.json and the kernels it names, its settings too) with `entries`
    added, or put in place of its own for the same shapes; `kernels` holds their texts by kernel name.
    Returns the table."""
    base, out = Path(base), Path(out_dir)
    table = json.loads((base / "table.json").read_text())
    table["entries"] = {**table.get("entries", {}), **entries}
    names = {e["kernel"] for e in table["entries"].values()} | {table["fallback"]}
    write_kernels(out, {name: kernels[name] if name in kernels else stored_text(base, name) for name in sorted(names)})
    (out / "table.json").write_text(json.dumps(table, indent=1))
    return table


def set_autotune(folder: str | Path, width: int) -> dict:
    """Set a library's first-call search width in its table (0: none; merge_libraries' `autotune`).
    Returns the table."""
    path = Path(folder) / "table.json"
    table = json.loads(path.read_text())
    table.pop("autotune", None)
    table |= {"autotune": width} if width else {}
    path.write_text(json.dumps(table, indent=1))
    return table


def pin_library(folder: str | Path, problems: list[Problem], out_dir: str | Path,
                choose: Callable[[Library, Problem], Choice] | None = None) -> dict:
    """A copy of the library `folder` whose choice for each of `problems`, as its dispatch makes it
    today, is fixed as an exact entry (source "pinned", with how it was chosen). Benched beside the same
    library after its dispatch rule changed, it puts the old rule's choices in the same run as the new
    one's (`hgemm pin`). `choose(library, problem)` in place of the dispatch rule (hgemm.ops.autotuned's
    first-call search, say). Returns the table."""
    lib = Library(folder)
    entries = {}
    for problem in problems:
        choice = choose(lib, problem) if choose else lib.lookup(problem)
        entries[problem.key] = {"kernel": choice.name, "source": "pinned", "how": choice.how}
    return write_with_entries(folder, entries, {}, out_dir)


def copy_library(sources: list[str | Path], problems: list[Problem], out_dir: str | Path) -> dict:
    """Libraries tuned earlier (e.g. the committed benchmarks/tune and benchmarks/sample_tune) as the tune
    stage's output, in place of tuning again: one folder copied, several merged (merge_libraries), with
    their kernels and one results file (bench.json: every folder's measured shapes, a shape two tuned
    once per run, and the first one's environment). Checked to cover every problem (an entry or a pending shape of some table). Returns
    the table; a folder that is not such a library raises ValueError."""
    sources = [Path(f) for f in sources]
    results = []
    for source in sources:
        if not (source / "table.json").is_file():
            raise ValueError(f"{source}: not a tuned library (no table.json)")
        if (found := tune_results(source)) is None:
            raise ValueError(f"{source}: no bench.json or bench.json.gz beside its table")
        results.append(found)
    out = Path(out_dir)
    if len(sources) == 1:
        table = json.loads(read_user_text(sources[0] / "table.json"))
        attach_timed(table.get("entries", {}), results[0])
        table.setdefault("dispatch", DEFAULT_DISPATCH)
        write_kernels(out, {path.stem: path.read_text() for path in (sources[0] / "kernels").glob("*.cu")})
        for name in ("summary.md", "goals.md"):
            if (sources[0] / name).is_file():
                (out / name).write_text((sources[0] / name).read_text())
    else:
        table = merge_libraries(sources, out, results=results)
        for name in ("summary.md", "goals.md"):  # a single library's, left by an earlier copy into this folder
            (out / name).unlink(missing_ok=True)
    covered = set(table.get("entries", {})) | set(table.get("pending", []))
    missing = [p.key for p in problems if p.key not in covered]
    if missing:
        raise ValueError(f"{', '.join(map(str, sources))}: tuned on another grid: {len(missing)} of {len(problems)} "
                         f"shapes not in {'its table' if len(sources) == 1 else 'their tables'} (first: {missing[0]})")
    merged = dict(results[0], problems=[pr for r in results for pr in r.get("problems", [])])
    (out / "bench.json").write_text(json.dumps(merged, separators=(",", ":"), default=str))
    (out / "table.json").write_text(json.dumps(table, indent=1))
    return table

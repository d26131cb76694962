"""Collect candidate documents: CUDA-ish source files shipped by installed packages, and the project's own kernels.

Every document carries its provenance (source, package, version, path, licence) so that the licence allowlist,
the statistics and any later audit can say where a training text came from. Harvesting never fails on a bad
file: binary, non-UTF-8 and unreadable files are skipped and counted in a `skips` Counter (reason -> count).
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import importlib
import importlib.metadata as md
import json
import logging
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

from hgemm.candidate import SpecError, parse_spec
from hgemm.library import tune_results
from hgemm.problem import Problem, load_grid
from kernels_corpus.framing import CANDIDATE_TOKEN, END_TOKEN, PROBLEM_TOKEN, format_training_example, reference_block

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGE = "hgemm-l2"
PROJECT_LICENCE = "project"
# Enough of a file's head to recognise binary content without reading whole archives.
BINARY_SNIFF_BYTES = 8192
# The values of Document.source: what a pretraining mix can weight (pretrain.train.source_weights).
SOURCES = ("package", "family_variant", "reference", "task", "tuned")


@dataclass(frozen=True)
class Document:
    text: str
    source: str  # one of SOURCES
    package: str
    version: str
    path: str
    licence: str

    def as_row(self) -> dict:
        return asdict(self)


def resolve_project_path(pattern: str) -> str:
    """Config paths are relative to the repository root, so a stage behaves the same from any cwd."""
    p = Path(pattern)
    return str(p if p.is_absolute() else PROJECT_ROOT / p)


def project_version() -> str:
    try:
        return md.version(PROJECT_PACKAGE)
    except md.PackageNotFoundError:
        # Not pip-installed (plain checkout): read the version pyproject.toml declares.
        match = re.search(r'^version\s*=\s*"([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(), re.M)
        return match.group(1) if match else "0+unknown"


# ----------------------------------------------------------------------------------------- licences

_CLASSIFIER_LICENCES = {
    "MIT License": "MIT",
    "BSD License": "BSD",
    "Apache Software License": "Apache-2.0",
    "Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
}


def package_licence(dist: md.Distribution) -> str:
    """The licence a distribution declares, preferring the SPDX expression (PEP 639) over free text."""
    meta = dist.metadata
    expression = (meta.get("License-Expression") or "").strip()
    if expression:
        return expression
    text = (meta.get("License") or "").strip()
    # Some packages paste the whole licence text into License; only a short one-line value is a name.
    if text and "\n" not in text and len(text) <= 80 and text.upper() != "UNKNOWN":
        return text
    for classifier in meta.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            leaf = classifier.split("::")[-1].strip()
            return _CLASSIFIER_LICENCES.get(leaf, leaf)
    return "unknown"


def licence_allowed(licence: str, allowlist: Iterable[str]) -> bool:
    """True when an SPDX-like expression is acceptable under the allowlist (case-insensitive).

    `A OR B` needs one allowed side; `A AND B` needs every part; `X WITH exception` counts as X.
    Parentheses are ignored, which is conservative for the mixed expressions packages actually ship."""
    allowed = {a.strip().lower() for a in allowlist}
    expr = licence.replace("(", " ").replace(")", " ").strip().lower()
    if expr in allowed:
        return True

    def term_ok(term: str) -> bool:
        return term.split(" with ")[0].strip() in allowed

    return any(
        all(term_ok(t) for t in alternative.split(" and ")) for alternative in expr.split(" or ")
    )


# ----------------------------------------------------------------------------------------- file reading


def read_text_file(path: Path, skips: Counter) -> str | None:
    """UTF-8 text of a file, or None with the reason counted (binary, non-UTF-8, unreadable)."""
    try:
        data = path.read_bytes()
    except OSError:
        skips["unreadable"] += 1
        return None
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        skips["binary"] += 1
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        skips["non_utf8"] += 1
        return None


# ----------------------------------------------------------------------------------------- packages


def find_distributions(
    patterns: list[str], search_paths: list[str] | None, missing: list[str]
) -> list[md.Distribution]:
    """Installed distributions whose normalised name matches a configured name or glob (e.g. nvidia-cuda-*).

    A pattern that matches nothing is a warning, not an error: CPU machines lack the CUDA packages."""
    kwargs = {"path": [resolve_project_path(p) for p in search_paths]} if search_paths else {}
    by_name: dict[str, md.Distribution] = {}
    for dist in md.distributions(**kwargs):
        name = _normalise(dist.metadata["Name"] or "")
        by_name.setdefault(name, dist)  # first on the path wins, as for imports
    chosen: dict[str, md.Distribution] = {}
    for pattern in patterns:
        hits = sorted(n for n in by_name if fnmatch.fnmatchcase(n, _normalise(pattern)))
        if not hits:
            log.warning("corpus: package %r is not installed; skipping it", pattern)
            missing.append(f"package {pattern}")
        for name in hits:
            chosen[name] = by_name[name]
    return [chosen[n] for n in sorted(chosen)]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def harvest_package(
    dist: md.Distribution, extensions: Iterable[str], exclude_globs: Iterable[str], skips: Counter
) -> Iterator[Document]:
    """Documents for one distribution's files, in sorted path order (determinism)."""
    exts = tuple(e.lower() for e in extensions)
    excludes = list(exclude_globs)
    name, version, licence = dist.metadata["Name"], dist.version, package_licence(dist)
    for rel in sorted(str(f) for f in (dist.files or [])):
        if not rel.lower().endswith(exts) or any(fnmatch.fnmatch(rel, g) for g in excludes):
            continue
        text = read_text_file(Path(dist.locate_file(rel)), skips)
        if text is not None:
            yield Document(text, "package", name, version, rel, licence)


def harvest_packages(cfg, skips: Counter, missing: list[str]) -> Iterator[Document]:
    for dist in find_distributions(cfg.packages, cfg.search_paths, missing):
        yield from harvest_package(dist, cfg.extensions, cfg.exclude_path_globs, skips)


# ----------------------------------------------------------------------------------------- project kernels


def _lazy(module: str, attribute: str, missing: list[str]):
    """A function from a sibling module that may not exist yet; None (with a warning) when missing.

    Only absence is forgiven: an import error raised inside an existing module is a bug and propagates."""
    try:
        return getattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise
        reason = f"module {e.name} not found"
    except AttributeError:
        reason = f"{module} has no {attribute}"
    log.warning("corpus: %s.%s is not available (%s); skipping that source", module, attribute, reason)
    missing.append(f"{module}.{attribute}")
    return None


def harvest_reference(patterns: list[str], skips: Counter, framings: int = 0, seed: int = 0,
                      context_framings: int = 0) -> Iterator[Document]:
    """The reference kernels as they are, plus each framed as the answer to `framings` grid problems,
    and to `context_framings` more whose prompts show one or two reference kernels (rl_hgemm's
    contrastive prompts, speeds not measured).

    The references are the shortest complete candidates the project has (~1k tokens, against ~4k for a
    tuned family variant), so they are what a small model can learn to write whole within its context."""
    version = project_version()
    files = sorted({f for p in patterns for f in glob.glob(resolve_project_path(p))})
    texts = {}
    for f in files:
        text = read_text_file(Path(f), skips)
        if text is not None:
            texts[project_relative(f)] = text
    for rel, text in texts.items():
        yield Document(text, "reference", PROJECT_PACKAGE, version, rel, PROJECT_LICENCE)
        if framings <= 0 and context_framings <= 0:
            continue
        rng = random.Random(f"{seed}:{rel}")
        problems = _framing_problems(text)
        for problem in rng.sample(problems, min(framings, len(problems))):
            yield Document(format_training_example(problem, text), "reference", PROJECT_PACKAGE, version,
                           f"{rel}#{problem.key}", PROJECT_LICENCE)
        for i in range(context_framings):
            # The answer may be one of the kernels shown: in RL the policy's best kernel is often what
            # it writes again, and copying a shown kernel is a correct start.
            shown = rng.sample(sorted(texts), min(rng.choice((1, 2)), len(texts)))
            problem = rng.choice(problems)
            yield Document(format_training_example(problem, text, context=[(texts[r], None) for r in shown]),
                           "reference", PROJECT_PACKAGE, version, f"{rel}#context{i}:{problem.key}",
                           PROJECT_LICENCE)


# Seed kernels are framed the way the model is prompted (kernels_corpus.framing): a problem, then the
# candidate, then <|end|>. A model pretrained on bare kernels never learns to answer a prompt, and RL
# then sees only parse errors (seen on the H200: every sample of the unframed gpu-quick run failed to parse).
FRAMING_GRID = PROJECT_ROOT / "configs" / "grids" / "default.yaml"
SAMPLE_FRAMING_GRID = PROJECT_ROOT / "configs" / "grids" / "sample_fit.yaml"  # shapes the default grid lacks


def _shape_class_for(name: str) -> str | None:
    # the families name their variants by family; each family targets one class of the grid
    for prefix, cls in (("skinny", "skinny"), ("batched_small", "batched_small")):
        if name.startswith(prefix):
            return cls
    return None


def _framing_problems(text: str) -> list:
    """Grid problems whose layout the candidate implements (NN when its spec does not parse)."""
    try:
        layouts = parse_spec(text).layouts
    except SpecError:  # not a valid candidate: still a kernel worth reading, framed for an NN problem
        layouts = ("NN",)
    return [p for p in load_grid(FRAMING_GRID) if p.layout in layouts]


def _variant(name: str):
    """(family module, params) of the family variant of that name; None for a name no family renders."""
    all_params = getattr(importlib.import_module("kernels_corpus.families"), "all_params", None)
    return next(((fam, p) for fam, p in all_params() if fam.name(p) == name), None) if all_params else None


@functools.lru_cache(maxsize=None)
def _served(fam, problems: tuple) -> tuple:
    """The problems that some variant of the family would time (its `applicable`)."""
    return tuple(p for p in problems if any(fam.applicable(v, p) for v in fam.variants()))


def frame_family_variant(name: str, text: str, rng) -> str:
    """`text` as the answer to a prompt for a grid problem it implements (same layout, its family's class).
    A family that serves none of them (narrow: N <= 16, which the default grid lacks) is framed with a
    problem of the shape sample's tuned part that the variant serves, or else one its family serves."""
    problems = _framing_problems(text)
    cls = _shape_class_for(name)
    preferred = [p for p in problems if p.shape_class == cls] if cls else [
        p for p in problems if p.shape_class not in ("skinny", "batched_small")]
    found = _variant(name)
    if found is not None and not _served(found[0], tuple(preferred or problems)):
        fam, params = found
        layouts = {p.layout for p in problems}
        wider = _served(fam, tuple(p for p in load_grid(SAMPLE_FRAMING_GRID) if p.layout in layouts))
        preferred = [p for p in wider if fam.applicable(params, p)] or list(wider) or preferred
    return format_training_example(rng.choice(preferred or problems), text)


def frame_task_solution(task, show_reference: bool = False) -> str:
    """The task's solution as the answer to its prompt; show_reference: with the solution also shown in
    the prompt, as rl_general's prompts show it (tasks.show_reference)."""
    body = task.prompt(list(task.sizes[:2]))
    if show_reference:
        body += "\n" + reference_block(task.solution)
    return f"{PROBLEM_TOKEN}\n{body}\n{CANDIDATE_TOKEN}\n{task.solution.strip()}\n{END_TOKEN}"


def harvest_family_variants(n: int, seed: int, missing: list[str], framed: bool = True) -> Iterator[Document]:
    if n <= 0:
        return
    sample_variants = _lazy("kernels_corpus.families", "sample_variants", missing)
    if sample_variants is None:
        return
    version = project_version()
    rng = random.Random(seed)
    for name, text in sample_variants(n, seed):
        if framed:
            text = frame_family_variant(name, text, rng)
        yield Document(text, "family_variant", PROJECT_PACKAGE, version, f"families/{name}", PROJECT_LICENCE)


def tuned_comment(entry: dict, gpu: str) -> str:
    """The first line of a tuned kernel's document: what it measured on the shape it won."""
    return (f"// measured on {gpu}: {entry['time_us']:.1f} us, {entry['speedup_vs_best']:.2f}x the strongest "
            f"baseline ({entry['best_baseline']})")


def tuned_measurements(folder: Path) -> dict[str, dict[str, float]]:
    """problem key -> {candidate name: speedup over the strongest baseline} for every verified candidate
    a tune timed (its bench.json or bench.json.gz); {} when the folder keeps no results file."""
    results = tune_results(folder)
    if results is None:
        return {}
    out = {}
    for pr in results.get("problems", []):
        timed = {n: float(r["speedup_vs_best"]) for n, r in pr.get("candidates", {}).items()
                 if r.get("status") == "ok" and isinstance(r.get("speedup_vs_best"), (int, float))}
        out[Problem.from_dict(pr["problem"]).key] = timed
    return out


def harvest_tuned(folders: list[str], exclude_keys: set[str], contrasts: int,
                  missing: list[str]) -> Iterator[Document]:
    """The tuned libraries' winners, each the answer to a prompt for the shape it won: the kernel in the
    families' short form (includes, launch spec, one instantiating entry) under a comment with its
    measured time and speedup against the strongest baseline. The prompt shows, as rl_hgemm's
    contrastive prompts do, up to `contrasts` other family kernels the tune timed on that shape (the
    slowest and ones spread up to the winner), each with its measured speedup; where the tune kept no
    results file or timed no other family kernel there, the fastest reference kernel instead. These are
    the performance hints from which a model learns which configuration suits which shape. Shapes in
    `exclude_keys` (held-out grids) are left out."""
    all_params = _lazy("kernels_corpus.families", "all_params", missing)
    if all_params is None or not folders:
        return
    renders = {fam.name(p): (fam, p) for fam, p in all_params()}
    version = project_version()
    for folder_name in folders:
        folder = Path(resolve_project_path(folder_name))
        table = json.loads((folder / "table.json").read_text())
        measured = tuned_measurements(folder)
        stored = {path.stem: path.read_text() for path in sorted((folder / "kernels").glob("*.cu"))}
        gpu = ((table.get("env") or {}).get("gpus") or [{}])[0].get("name", "the tuning GPU")
        for key, entry in sorted(table.get("entries", {}).items()):
            if key in exclude_keys or entry.get("kernel") not in renders \
                    or not isinstance(entry.get("speedup_vs_best"), (int, float)):
                continue  # held out, a kernel no family renders (a reference, a model's), or never timed
            fam, params = renders[entry["kernel"]]
            problem = Problem.from_key(key, entry.get("shape_class", "adhoc"))
            others = sorted((s, n) for n, s in measured.get(key, {}).items()
                            if n in renders and n != entry["kernel"] and s < entry["speedup_vs_best"])
            n = min(contrasts, len(others))
            picks = [others[round(i * (len(others) - 1) / max(1, n - 1))] for i in range(n)]
            context = [(renders[n][0].render(renders[n][1]), s) for s, n in dict.fromkeys(picks)]
            if not context:
                references = {n: s for n, s in (entry.get("references") or {}).items() if n in stored}
                if references:
                    name = max(references, key=references.get)
                    context = [(stored[name], float(references[name]))]
            answer = tuned_comment(entry, gpu) + "\n" + fam.render(params)
            yield Document(format_training_example(problem, answer, context=context), "tuned", PROJECT_PACKAGE,
                           version, f"tuned/{folder.name}/{key}:{entry['kernel']}", PROJECT_LICENCE)


def harvest_tasks(missing: list[str], framed: bool = True, with_reference: bool = False) -> Iterator[Document]:
    """Each task's solution, framed as the answer to its prompt (and, with_reference, once more with the
    solution shown in the prompt)."""
    load_tasks = _lazy("kernels_corpus.tasks", "load_tasks", missing)
    if load_tasks is None:
        return
    version = project_version()
    for task in sorted(load_tasks(), key=lambda t: t.name):
        if not task.solution:
            continue
        text = frame_task_solution(task) if framed else task.solution
        yield Document(text, "task", PROJECT_PACKAGE, version, f"tasks/{task.name}", PROJECT_LICENCE)
        if framed and with_reference:
            yield Document(frame_task_solution(task, show_reference=True), "task", PROJECT_PACKAGE, version,
                           f"tasks/{task.name}#reference", PROJECT_LICENCE)


def project_relative(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)

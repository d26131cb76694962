"""Imports run one way, down the layers of DESIGN.md: instrument < kernels < corpus < training < stages.

A pure-ast check (nothing of the project is imported): every .py under the four packages is parsed,
relative imports are resolved, and `from X import name` counts as an import of X.name where that is
a module or package, else of X. It fails on an import from a higher layer (at module level or inside
a function), on any cycle in the module import graph (an import of a package is one of its
__init__), and on a function-local import that defers nothing heavy or says nothing about it.

A function-local import is for deferring a heavy or GPU-only module (HEAVY): one imported directly,
or one a project module loads through its module-level imports. The importing module must not load
that heavy module at its top anyway, and a comment on the import's line or the line above (or above
a run of such imports, one after the other) says what is deferred. Everything else is imported at
the top of the module.
"""

from __future__ import annotations

import ast
import io
import shutil
import tokenize
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = ("hgemm", "kernels_corpus", "training", "stages")

INSTRUMENT, KERNELS, CORPUS, TRAINING, STAGES = range(5)
LAYER_NAMES = ("instrument", "kernels", "corpus", "training", "stages")

# Third-party modules worth deferring: slow to import, or usable only on a GPU machine.
HEAVY = frozenset({
    "torch", "cupy", "cupy_backends", "pycuda", "cuda", "nvmath", "pynvml", "transformers", "datasets",
    "tokenizers", "trl", "deepspeed", "accelerate", "matplotlib", "datasketch", "snakemake", "tensorboard",
    "scipy",
})

# Module-name prefix -> layer; the longest matching prefix wins. Every module must match one.
LAYERS = {
    # the measuring instrument: problem and grids, candidate format, compile, run, verify, time,
    # baselines, pool, and the report over the results files
    **{f"hgemm.{name}": INSTRUMENT for name in (
        "problem", "files", "candidate", "compile", "sass", "envinfo", "tensormap", "params",
        "entry", "clocks", "timing", "verify", "rotation", "runtime", "baselines", "evaluate",
        "evaluate_task", "pool", "spin", "summary", "report", "shape_sample")},
    # the package itself (`hgemm.matmul`), tune, library, judge, bench and the CLI
    "hgemm": KERNELS,
    "kernels_corpus.families": KERNELS,
    "kernels_corpus.tasks": KERNELS,
    "kernels_corpus.reference": KERNELS,
    "kernels_corpus": CORPUS,
    "training": TRAINING,
    "stages": STAGES,
}


def layer_of(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, module: str) -> bool:
    base = root.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _comment_lines(source: str) -> set[int]:
    return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


class _Imports(ast.NodeVisitor):
    """(node, imported module names, inside a function?) for every import statement of one file."""

    def __init__(self, root: Path, module: str, is_package: bool):
        self.root, self.module, self.is_package = root, module, is_package
        self.depth = 0
        self.found: list[tuple[ast.stmt, list[str], bool]] = []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import):
        self.found.append((node, [a.name for a in node.names], self.depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.level:
            package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        targets = []
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            targets.append(sub if alias.name != "*" and _is_module(self.root, sub) else base)
        self.found.append((node, sorted(set(targets)), self.depth > 0))


def _heavy_at_top(module: str, top: dict[str, set[str]], seen: set[str] | None = None) -> set[str]:
    """The HEAVY modules that importing `module` loads: itself, or through the module-level imports of
    it and of the packages above it."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return {parts[0]} & HEAVY
    seen = set() if seen is None else seen
    out: set[str] = set()
    for name in [".".join(parts[:i]) for i in range(1, len(parts))] + [module]:
        for target in top.get(name, ()):
            if target not in seen:
                seen.add(target)
                out |= _heavy_at_top(target, top, seen)
    return out


def check_layers(root: Path) -> list[str]:
    """Every breach of the import rules in the tree at root, one line each ("path:line: what")."""
    root = Path(root)
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    top: dict[str, set[str]] = {}  # module -> what it imports at module level
    files = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            module = _module_name(root, path)
            source = path.read_text()
            visitor = _Imports(root, module, path.name == "__init__.py")
            visitor.visit(ast.parse(source, rel))
            top[module] = {t for _, targets, local in visitor.found if not local for t in targets}
            files.append((rel, module, source, visitor.found))
    for rel, module, source, found in files:
        own = layer_of(module)
        if own is None:
            problems.append(f"{rel}: module {module} is in no layer of LAYERS")
            continue
        graph.setdefault(module, set())
        comments = _comment_lines(source) if any(local for _, _, local in found) else set()
        lines = source.splitlines()
        said_until = 0  # last line of a run of commented local imports: the next one (blank lines apart) shares it
        for node, targets, local in found:
            project = [t for t in targets if t.split(".")[0] in PACKAGES]
            if local:
                deferred = set().union(*(_heavy_at_top(t, top) for t in targets)) - _heavy_at_top(module, top)
                said = (bool(comments & set(range(node.lineno - 1, (node.end_lineno or node.lineno) + 1)))
                        or 0 < said_until < node.lineno and not any(x.strip() for x in lines[said_until:node.lineno - 1]))
                said_until = (node.end_lineno or node.lineno) if said else 0
                if not deferred:
                    problems.append(f"{rel}:{node.lineno}: function-local import of {', '.join(targets)} defers "
                                    f"no heavy import that {module} does not make at its top: import it there")
                elif not said:
                    problems.append(f"{rel}:{node.lineno}: function-local import of {', '.join(targets)} without "
                                    f"a comment saying what it defers ({', '.join(sorted(deferred))})")
            for target in project:
                theirs = layer_of(target)
                if theirs is not None and theirs > own:
                    problems.append(f"{rel}:{node.lineno}: {module} ({LAYER_NAMES[own]}) imports "
                                    f"{target} ({LAYER_NAMES[theirs]}), a higher layer")
                if target != module:
                    graph[module].add(target)
                    where.setdefault((module, target), f"{rel}:{node.lineno}")
    for cycle in _cycles(graph):
        steps = ", ".join(f"{a} -> {b} ({where[a, b]})" for a, b in zip(cycle, cycle[1:] + cycle[:1])
                          if (a, b) in where)
        problems.append(f"import cycle: {steps}")
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    cycles = []
    for component in components:
        members = set(component)
        start = min(component)
        # a shortest path back to start inside the component (breadth first)
        parents: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in parents:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w not in parents:
                        parents[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [start]
        v = parents[start]
        while v != start:
            path.append(v)
            v = parents[v]
        cycles.append([path[0], *reversed(path[1:])])
    return sorted(cycles)


def test_imports_run_down_the_layers():
    problems = check_layers(ROOT)
    assert not problems, "\n".join(problems)


def _copy_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _append(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.write_text(path.read_text() + "\n" + text)


def test_the_checker_catches_an_upward_import(tmp_path):
    root = _copy_tree(tmp_path)
    _append(root, "hgemm/problem.py", "import training.model\n")
    _append(root, "training/data.py", "from stages.common import build_dataclass\n")
    found = check_layers(root)
    assert any(p.startswith("hgemm/problem.py:") and "hgemm.problem (instrument) imports training.model (training)" in p
               for p in found), found
    assert any(p.startswith("training/data.py:") and "imports stages.common (stages)" in p for p in found), found


def test_the_checker_resolves_relative_and_local_imports(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "hgemm" / "report" / "extra.py").write_text("from ...training import model\n")
    _append(root, "hgemm/summary.py", "def late():\n    from kernels_corpus import families  # planted\n")
    found = check_layers(root)
    assert any(p.startswith("hgemm/report/extra.py:1:") and "imports training.model (training)" in p for p in found)
    assert any(p.startswith("hgemm/summary.py:") and "imports kernels_corpus.families (kernels)" in p for p in found)


def test_the_checker_catches_a_cycle(tmp_path):
    root = _copy_tree(tmp_path)
    _append(root, "hgemm/files.py", "from .problem import Problem\n")
    found = check_layers(root)
    assert any(p.startswith("import cycle:") and "hgemm.files -> hgemm.problem" in p
               and "hgemm.problem -> hgemm.files" in p for p in found), found


def test_the_checker_holds_local_imports_to_heavy_ones_said_so(tmp_path):
    root = _copy_tree(tmp_path)
    _append(root, "hgemm/problem.py", "\n".join([
        "def light():",
        "    import json",  # stdlib: belongs at the top
        "    from hgemm import files",  # a light project module: at the top too
        "def silent():",
        "    import torch",
        "def said():",
        "    # torch only where a tensor is made",
        "    import torch",
        "    from hgemm import runtime",  # runtime loads PyCUDA; shares the comment above
        "def deferred_twice():",
        "    from hgemm import verify  # loads torch",
        ""]))
    found = [p for p in check_layers(root) if p.startswith("hgemm/problem.py:")]
    assert len(found) == 3, found
    assert "function-local import of json defers no heavy import" in found[0]
    assert "function-local import of hgemm.files defers no heavy import" in found[1]
    assert "function-local import of torch without a comment" in found[2]

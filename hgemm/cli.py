"""`hgemm check FILE...`, `hgemm bench --kernels PATH --grid GRID --out results.json`, `hgemm tune`,
and `hgemm summarize RESULTS [--goals]` (Markdown again from a results file, no GPU needed)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from .compile import detect_arch
from .entry import EvalOptions
from .problem import Problem, load_grid


def candidate_files(path: str) -> list[tuple[str, str]]:
    """(name, text) for a .cu file or every .cu file in a folder (name = file stem)."""
    p = Path(path)
    files = sorted(p.glob("*.cu")) if p.is_dir() else [p]
    if not files:
        raise SystemExit(f"no .cu candidates under {path}")
    return [(f.stem, f.read_text()) for f in files]


def cmd_check(args) -> int:
    from .pool import compile_all

    failed = 0
    named = [nt for path in args.files for nt in candidate_files(path)]
    for (name, _), (entry, info) in zip(named, compile_all(named, arch=args.arch, sass=True)):
        if entry is None:
            failed += 1
            print(f"{name}: {info['status']}\n  {info['error']}")
            continue
        for layout, res in info["resources"].items():
            print(f"{name} [{layout}]: {res['registers']} registers, {res['smem_static']} B static smem, "
                  f"{res['stack_frame']} B stack, spills {res['spill_stores']}/{res['spill_loads']} B")
            mix = res.get("sass")
            print("  SASS: " + (f"{mix['path']}; {mix['instructions']} instructions; "
                                + ", ".join(f"{k} {v}" for k, v in sorted(mix["counts"].items(), key=lambda kv: -kv[1]))
                                if mix else "not available (no nvdisasm: pip install nvidia-cuda-nvdisasm)"))
    return 1 if failed else 0


def run_bench(named: list[tuple[str, str]], problems, options: EvalOptions, arch: str | None = None,
              progress: bool = True, select: Callable[[Problem, str], bool] | None = None) -> dict:
    """Compile everything, then (where a GPU is visible) evaluate every problem. Library entry point
    of `hgemm bench`, also used by the tune and bench stages. `select(problem, name)` limits which
    candidates run on which problem (default: all on all)."""
    chosen = (lambda p, n: True) if select is None else select
    from .envinfo import environment
    from .pool import EvaluationPool, compile_all, visible_gpus

    layouts = tuple(sorted({p.layout for p in problems}))
    compiled = compile_all(named, layouts, arch, sass=True)
    cand_info = {name: info for (name, _), (_, info) in zip(named, compiled)}
    entries = [e for e, _ in compiled if e is not None]
    gpus = visible_gpus()
    out = {"env": environment(options.timing_method), "options": options.to_dict(), "arch": arch or detect_arch(),
           "gpu_run": bool(gpus), "candidates": cand_info, "problems": []}
    if not gpus:
        out["note"] = "compiled, not run: no GPU visible"
        for p in problems:
            out["problems"].append({"problem": p.to_dict(), "candidates": {
                name: ({"status": "compiled"} if info["status"] == "compiled" else info)
                for name, info in cand_info.items() if chosen(p, name)}})
        return out
    jobs = [(p, [e for e in entries if p.layout in e.cubins and chosen(p, e.name)]) for p in problems]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc="problems", file=sys.stderr)
    with EvaluationPool(options, gpus) as pool:
        results = pool.run(jobs, progress=bar.update if bar else None)
        out["worker_restarts"] = pool.restarts
        out["gpus_used"] = list(pool.gpus)  # one worker process per GPU
        out["ceilings"] = pool.ceilings
    if bar:
        bar.close()
    for p, res in zip(problems, results):
        # compile failures are results too, so every candidate appears on every problem
        for name, info in cand_info.items():
            if info["status"] != "compiled" and chosen(p, name):
                res["candidates"][name] = info
        out["problems"].append(res)
    return out


def _problems_and_options(args) -> tuple[list[Problem], EvalOptions]:
    problems = load_grid(args.grid)
    if args.classes:
        problems = [p for p in problems if p.shape_class in args.classes]
    if args.limit:
        problems = problems[:args.limit]
    options = EvalOptions(reps=args.reps, timing=not args.no_timing, torch_compile=args.torch_compile,
                          timing_method=args.timing_method)
    if args.baselines:
        options.baselines = tuple(args.baselines.split(","))
    return problems, options


def library_candidates(path: str, problems: list[Problem]) -> tuple[list[tuple[str, str]], Callable]:
    """The library's choice for every problem, as bench candidates named `library:<kernel>`."""
    from .library import Library

    lib = Library(path)
    picks = {p: lib.lookup(p) for p in problems}
    named = sorted({(f"library:{c.name}", c.candidate.source) for c in picks.values()})
    return named, lambda p, name: name == f"library:{picks[p].name}"


def cmd_bench(args) -> int:
    from .summary import markdown

    problems, options = _problems_and_options(args)
    if bool(args.kernels) == bool(args.library):
        raise SystemExit("give exactly one of --kernels or --library")
    if args.library:
        named, select = library_candidates(args.library, problems)
    else:
        named, select = candidate_files(args.kernels), None
    results = run_bench(named, problems, options, args.arch, select=select)
    results["grid"] = str(args.grid)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=str))
    md = markdown(results)
    Path(args.markdown or out.with_suffix(".md")).write_text(md)
    print(md)
    return 0


def cmd_tune(args) -> int:
    from .tune import tune

    problems, options = _problems_and_options(args)
    table = tune(problems, args.out, options, args.tiles, args.arch)
    print((Path(args.out) / "summary.md").read_text())
    print(f"{len(table['entries'])} of {len(problems)} shapes have a verified kernel; table in {args.out}/table.json")
    return 0


def cmd_summarize(args) -> int:
    """Markdown again from a results file already on disk (no GPU): after a change to the summaries, or
    on a machine that only has the committed JSON."""
    from .summary import goals_markdown, markdown

    results = json.loads(Path(args.results).read_text())
    md = goals_markdown(results) if args.goals else markdown(results)
    if args.out:
        Path(args.out).write_text(md)
    print(md)
    return 0


def _grid_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", required=True, help="grid YAML (see configs/grids/)")
    p.add_argument("--classes", nargs="*", help="only these shape classes of the grid")
    p.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions per contender")
    p.add_argument("--baselines", default=None, help="comma-separated baselines (default: all but torch_compile)")
    p.add_argument("--torch-compile", action="store_true", help="add torch.compile max-autotune (slow to tune)")
    p.add_argument("--timing-method", default="spin_batch", choices=("spin_batch", "events"), help="how to time")
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument("--arch", default=None, help="target arch (default: the GPU's, else sm_90a)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hgemm", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="parse and compile candidates, print their resource use")
    c.add_argument("files", nargs="+", help="candidate .cu files or folders of them")
    c.add_argument("--arch", default=None, help="target, e.g. sm_90a (default: the GPU's, else sm_90a)")
    c.set_defaults(fn=cmd_check)

    b = sub.add_parser("bench", help="verify and time candidates against the baselines over a grid")
    b.add_argument("--kernels", default=None, help="a candidate .cu file or a folder of them")
    b.add_argument("--library", default=None, help="a tuned library folder: bench its choice per shape")
    b.add_argument("--out", required=True, help="results JSON path (a Markdown summary goes beside it)")
    b.add_argument("--markdown", default=None, help="summary path (default: OUT with .md)")
    _grid_args(b)
    b.set_defaults(fn=cmd_bench)

    t = sub.add_parser("tune", help="time the seed families per shape; write the dispatch table and winners")
    t.add_argument("--out", required=True, help="library folder: table.json, kernels/, bench.json, summary.md")
    t.add_argument("--tiles", type=int, default=5, help="distinct tile shapes per family and shape to time")
    _grid_args(t)
    t.set_defaults(fn=cmd_tune)

    m = sub.add_parser("summarize", help="the Markdown summary (or issue 3's goals) of an existing results JSON")
    m.add_argument("results", help="results JSON of hgemm bench, or a library's bench.json")
    m.add_argument("--goals", action="store_true", help="the per-class goals table with each miss (goals.md)")
    m.add_argument("--out", default=None, help="write the Markdown here as well as printing it")
    m.set_defaults(fn=cmd_summarize)

    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())

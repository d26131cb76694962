"""`hgemm check FILE...`, `hgemm bench --kernels PATH --grid GRID --out results.json`, `hgemm tune`,
`hgemm merge`, `hgemm pin LIBRARY --grid GRID --out DIR` (a library's choices on a grid, fixed) and
`hgemm summarize RESULTS... [--goals | --libraries A,B]` (Markdown again from results files, no GPU needed).

A user error (a missing or unreadable file, a bad grid, an empty selection, a bad option value) ends
the command with one line on stderr and a non-zero exit: argparse's `error:` line for options,
`hgemm: <file>: <what>` for files. Anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Callable

from . import __version__
from .bench import run_bench
from .compile import name_source
from .entry import BASELINES, SEARCH_TIMERS, TIMING_METHODS, EvalOptions
from .files import UnreadableFile, read_user_text
from .library import DEFAULT_DISPATCH, DISPATCH_RULES, Library, merge_libraries, pin_library, refresh_launch_specs
from .pool import compile_all, visible_gpus
from .problem import GridError, Problem, load_grid, select_problems
from .summary import goals_markdown, libraries_markdown, markdown
from .tune import DEFAULT_TILES, DEFAULT_TOP, seed_state, tune


def user_error(what: str) -> SystemExit:
    """The one line a user error ends a command with (exit status 1)."""
    return SystemExit(f"hgemm: {what}")


def _read_text(path: Path) -> str:
    try:
        return read_user_text(path)
    except UnreadableFile as e:
        raise user_error(str(e)) from None


def candidate_paths(path: str) -> list[Path]:
    """A .cu file, or every .cu file in a folder."""
    p = Path(path)
    if not p.exists():
        raise user_error(f"{path}: no such file or folder")
    files = sorted(p.glob("*.cu")) if p.is_dir() else [p]
    if not files:
        raise user_error(f"{path}: no .cu candidates in this folder")
    return files


def candidate_files(path: str) -> list[tuple[str, str]]:
    """(name, text) for a .cu file or every .cu file in a folder (name = file stem)."""
    return [(f.stem, _read_text(f)) for f in candidate_paths(path)]


def cmd_check(args) -> int:
    failed = 0
    paths = [f for path in args.files for f in candidate_paths(path)]
    named = [(f.stem, _read_text(f)) for f in paths]  # every file read before any compile starts
    for path, (entry, info) in zip(paths, compile_all(named, arch=args.arch, sass=True)):
        if entry is None:
            failed += 1
            print(f"{path}: {info['status']}\n  {name_source(info['error'], str(path))}")
            continue
        for layout, res in info["resources"].items():
            print(f"{path} [{layout}]: {res['registers']} registers, {res['smem_static']} B static smem, "
                  f"{res['stack_frame']} B stack, spills {res['spill_stores']}/{res['spill_loads']} B")
            mix = res.get("sass")
            print("  SASS: " + (f"{mix['path']}; {mix['instructions']} instructions; "
                                + ", ".join(f"{k} {v}" for k, v in sorted(mix["counts"].items(), key=lambda kv: -kv[1]))
                                if mix else "not available (no nvdisasm: pip install nvidia-cuda-nvdisasm)"))
    return 1 if failed else 0


def _problems_and_options(args) -> tuple[list[Problem], EvalOptions]:
    problems = select_problems(load_grid(args.grid), args.classes, args.limit, where=args.grid)
    options = EvalOptions(reps=args.reps, timing=not args.no_timing, torch_compile=args.torch_compile,
                          timing_method=args.timing_method)
    if args.baselines:
        options.baselines = args.baselines
    return problems, options


def library_candidates(paths: list[str], problems: list[Problem]) -> tuple[list[tuple[str, str]], Callable]:
    """Each library's choice for every problem, as bench candidates named `library:<kernel>` (one
    library) or `<folder name>:<kernel>` (several, timed side by side in one run)."""
    for path in paths:
        if not (Path(path) / "table.json").is_file():
            raise user_error(f"{path}: not a tuned library (no table.json; `hgemm tune --out {path}` writes one)")
    prefixes = ["library"] if len(paths) == 1 else [Path(p).resolve().name for p in paths]
    if len(set(prefixes)) < len(prefixes):
        raise user_error(f"libraries compared in one run need distinct folder names: {', '.join(paths)}")
    picks = {}  # (problem, prefix) -> choice
    for path, prefix in zip(paths, prefixes):
        lib = Library(path)
        picks |= {(p, prefix): lib.lookup(p) for p in problems}
    named = sorted({(f"{prefix}:{c.name}", c.candidate.source) for (_, prefix), c in picks.items()})
    wanted = {p: {f"{prefix}:{picks[p, prefix].name}" for prefix in prefixes} for p in problems}
    return named, lambda p, name: name in wanted[p]


def cmd_bench(args) -> int:
    if bool(args.kernels) == bool(args.library):
        args.parser.error("give exactly one of --kernels or --library")
    problems, options = _problems_and_options(args)
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
    if args.library and len(args.library) > 1:
        md += "\n" + libraries_markdown(results, [Path(p).resolve().name for p in args.library])
    Path(args.markdown or out.with_suffix(".md")).write_text(md)
    print(md)
    return 0


def _require_library(path: str) -> None:
    if not (Path(path) / "table.json").is_file():
        raise user_error(f"{path}: not a tuned library (no table.json)")


def cmd_merge(args) -> int:
    """One library from several tune folders (hgemm.library.merge_libraries)."""
    for path in args.libraries:
        _require_library(path)
    try:
        table = merge_libraries(args.libraries, args.out, dispatch=args.dispatch, autotune=args.autotune)
    except (ValueError, OSError, KeyError) as e:  # clashing kernels, a kernel file the table names missing
        raise user_error(f"merge: {e}") from None
    sources = Counter(e["from"] for e in table["entries"].values())
    print(f"{args.out}: {len(table['entries'])} shapes ({', '.join(f'{n} from {s}' for s, n in sources.items())})")
    return 0


def cmd_refresh(args) -> int:
    """Stored family kernels launched as their family now launches them (hgemm.library.refresh_launch_specs)."""
    for path in args.libraries:
        _require_library(path)
        names = refresh_launch_specs(path)
        print(f"{path}: {len(names)} kernel texts given their family's current launch spec"
              + (f" ({', '.join(names)})" if names else ""))
    return 0


def cmd_pin(args) -> int:
    """A library's choices on a grid as exact entries (hgemm.library.pin_library)."""
    _require_library(args.library)
    problems = select_problems(load_grid(args.grid), args.classes, 0, where=args.grid)
    choose = None
    if args.autotune:
        if not visible_gpus():
            raise user_error("pin --autotune needs a GPU: it times kernels to choose among them")
        from . import ops  # torch's CUDA path and the driver bindings: only here

        lib = Library(args.library)
        searched = ops.autotuned_choices(lib, problems, args.autotune, args.search_timer)
        for p in problems:
            if p.key in searched:
                best, tried, found = searched[p.key]
                first = tried[0].name
                times = {n: t for n, t in found.items() if isinstance(t, float)}
                dropped = [str(t) for t in found.values() if not isinstance(t, float)]
                print(f"{p.key}: {best.name} {times.get(best.name, float('nan')):.1f} us, the rule's pick "
                      f"{first} {times.get(first, float('nan')):.1f} us, of {len(tried)} searched"
                      + (f" ({len(dropped)} dropped: {'; '.join(dropped)})" if dropped else ""))

        def choose(lib: Library, problem: Problem):
            return searched[problem.key].best if problem.key in searched else lib.lookup(problem)
    try:
        table = pin_library(args.library, problems, args.out, choose)
    except (ValueError, OSError, KeyError) as e:  # a kernel file the table names missing, a bad table
        raise user_error(f"pin: {e}") from None
    hows = Counter(table["entries"][p.key]["how"].split()[0] for p in problems)
    print(f"{args.out}: {len(problems)} shapes pinned ({', '.join(f'{n} {how}' for how, n in sorted(hows.items()))})")
    return 0


def cmd_tune(args) -> int:
    problems, options = _problems_and_options(args)
    for path in (args.beside, args.rank_by):
        if path:
            _require_library(path)
    if not visible_gpus():
        # on a CPU a tune compiles every shortlisted variant for minutes and then keeps none: say so at once
        raise user_error("tune needs a GPU: it keeps the fastest verified kernel, and no GPU is visible "
                         "(compile-only checks: hgemm check FILE...)")
    state_dir = Path(args.out) / "progress" if args.resume or args.max_seconds or args.resume_from else None
    if args.resume_from:
        try:
            seeded = seed_state(state_dir, args.resume_from)
        except (UnreadableFile, json.JSONDecodeError, KeyError) as e:
            raise user_error(f"--resume-from {args.resume_from}: not a tune folder to resume from ({e})") from None
        print(f"{seeded} shapes' results from {args.resume_from} (reused where today's settings match)")
    table = tune(problems, args.out, options, args.tiles, args.arch, state_dir=state_dir,
                 max_seconds=args.max_seconds, beside=Library(args.beside) if args.beside else None,
                 ranked_by=Library(args.rank_by) if args.rank_by else None, top=args.top)
    print((Path(args.out) / "summary.md").read_text())
    print(f"{len(table['entries'])} of {len(problems)} shapes have a verified kernel; table in {args.out}/table.json")
    if table["pending"]:
        print(f"{len(table['pending'])} shapes still to tune: run the same command again to go on")
    return 0


def cmd_summarize(args) -> int:
    """Markdown again from results files already on disk (no GPU): after a change to the summaries, or
    on a machine that only has the committed JSON. Several files (parts of one grid) are read as one."""
    results = None
    for path in args.results:
        try:
            part = json.loads(_read_text(Path(path)))
        except json.JSONDecodeError as e:
            raise user_error(f"{path}: not a results JSON file (line {e.lineno}: {e.msg})") from None
        if not isinstance(part, dict) or not isinstance(part.get("problems"), list):
            raise user_error(f"{path}: not a results file of hgemm bench or tune (no 'problems' list)")
        results = part if results is None else dict(results, problems=results["problems"] + part["problems"])
    if args.libraries:
        md = libraries_markdown(results, args.libraries.split(","))
    else:
        md = goals_markdown(results) if args.goals else markdown(results)
    if args.out:
        Path(args.out).write_text(md)
    print(md)
    return 0


def _int_at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is below {least}")
        return value

    return parse


def _baselines(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [n for n in names if n not in BASELINES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown baseline(s) {', '.join(unknown) or repr(text)} "
                                         f"(known: {', '.join(BASELINES)})")
    return names


def _grid_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", required=True, help="grid YAML (see configs/grids/)")
    p.add_argument("--classes", nargs="+", help="only these shape classes of the grid")
    p.add_argument("--limit", type=_int_at_least(0), default=0, help="only the first N problems (0: all)")
    p.add_argument("--reps", type=_int_at_least(1), default=10, help="timed repetitions per contender")
    p.add_argument("--baselines", type=_baselines, default=None,
                   help="comma-separated baselines (default: all but torch_compile)")
    p.add_argument("--torch-compile", action="store_true", help="add torch.compile max-autotune (slow to tune)")
    p.add_argument("--timing-method", "--timing", dest="timing_method", default="spin_batch", choices=TIMING_METHODS,
                   help="spin_batch: short interleaved batches at the clocks of the moment; sustained: each contender "
                        "back to back for 200 ms, the regime of training-like use; events: an event pair per launch")
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument("--arch", default=None, help="target arch (default: the GPU's, else sm_90a)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hgemm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="parse and compile candidates, print their resource use")
    c.add_argument("files", nargs="+", help="candidate .cu files or folders of them")
    c.add_argument("--arch", default=None, help="target, e.g. sm_90a (default: the GPU's, else sm_90a)")
    c.set_defaults(fn=cmd_check)

    b = sub.add_parser("bench", help="verify and time candidates against the baselines over a grid")
    b.add_argument("--kernels", default=None, help="a candidate .cu file or a folder of them")
    b.add_argument("--library", action="append", default=None,
                   help="a tuned library folder: bench its choice per shape (repeat to compare libraries)")
    b.add_argument("--out", required=True, help="results JSON path (a Markdown summary goes beside it)")
    b.add_argument("--markdown", default=None, help="summary path (default: OUT with .md)")
    _grid_args(b)
    b.set_defaults(fn=cmd_bench)

    t = sub.add_parser("tune", help="time the seed families per shape; write the dispatch table and winners")
    t.add_argument("--out", required=True, help="library folder: table.json, kernels/, bench.json, summary.md")
    t.add_argument("--tiles", type=_int_at_least(1), default=DEFAULT_TILES,
                   help="distinct tile shapes per family and shape to time")
    t.add_argument("--rank-by", dest="rank_by", default=None, metavar="LIBRARY",
                   help="a tuned library folder whose cost model picks each shape's shortlist (its --top "
                        "fastest estimates over every family's tile shapes) in place of --tiles a family")
    t.add_argument("--top", type=_int_at_least(1), default=DEFAULT_TOP,
                   help="with --rank-by: the variants a shape times")
    t.add_argument("--resume", action="store_true",
                   help="save each shape's result in OUT/progress and skip shapes saved under the same settings")
    t.add_argument("--resume-from", dest="resume_from", default=None, metavar="FOLDER",
                   help="also reuse an earlier tune folder's results (its settings.json and bench.json[.gz]) where "
                        "today's settings match (implies --resume)")
    t.add_argument("--beside", default=None,
                   help="a library folder whose kernel for each shape is timed in the same run, for comparison")
    t.add_argument("--max-seconds", type=float, default=None,
                   help="the call's budget, compiles included: start a chunk of shapes only if one as slow as the "
                        "slowest so far still fits (implies --resume; the saved chunks stay for the next call)")
    _grid_args(t)
    t.set_defaults(fn=cmd_tune)

    g = sub.add_parser("merge", help="one library from several tune folders: every shape, the faster entry where both tuned it")
    g.add_argument("libraries", nargs="+", help="tuned library folders (the first one's fallback is kept)")
    g.add_argument("--out", required=True, help="folder for the merged table.json and kernels/")
    g.add_argument("--dispatch", choices=DISPATCH_RULES, default=DEFAULT_DISPATCH,
                   help="how the library serves shapes it has no entry for (hgemm.library)")
    g.add_argument("--autotune", type=_int_at_least(0), default=0, metavar="K",
                   help="hgemm.matmul times the dispatch rule's pick beside the cost model's first K kernels at "
                        "a shape's first call, and keeps the fastest (0: the pick alone; hgemm.autotune)")
    g.set_defaults(fn=cmd_merge)

    r = sub.add_parser("refresh", help="give stored family kernels their family's current launch spec where only a "
                                       "code-neutral line differs (a workspace the kernel leaves zero)")
    r.add_argument("libraries", nargs="+", help="tuned library folders, rewritten in place")
    r.set_defaults(fn=cmd_refresh)

    n = sub.add_parser("pin", help="a copy of a library with its choice for every shape of a grid fixed as an exact "
                                   "entry: the old dispatch's choices, to bench beside a changed rule")
    n.add_argument("library", help="a tuned library folder")
    n.add_argument("--grid", required=True, help="grid YAML (see configs/grids/)")
    n.add_argument("--classes", nargs="+", help="only these shape classes of the grid")
    n.add_argument("--out", required=True, help="folder for the pinned table.json and kernels/")
    n.add_argument("--autotune", type=_int_at_least(0), default=0, metavar="K",
                   help="pin what hgemm.matmul's first-call search over the dispatch rule's pick and the cost "
                        "model's first K kernels chooses on this GPU (hgemm.autotune), not the rule's pick")
    n.add_argument("--search-timer", dest="search_timer", choices=SEARCH_TIMERS, default=SEARCH_TIMERS[0],
                   help="how the search times each kernel: launches queued behind a spin as the harness times them "
                        "(stream, as hgemm.matmul's own search), or replayed from a CUDA graph (graph)")
    n.set_defaults(fn=cmd_pin)

    m = sub.add_parser("summarize", help="the Markdown summary (or the library's per-class goals) of an existing results JSON")
    m.add_argument("results", nargs="+", help="results JSON of hgemm bench (or parts of one), or a library's bench.json")
    what = m.add_mutually_exclusive_group()
    what.add_argument("--goals", action="store_true", help="the per-class goals table with each miss (goals.md)")
    what.add_argument("--libraries", default=None, metavar="A,B",
                   help="only the side-by-side table of libraries benched together (hgemm bench --library A --library B)")
    m.add_argument("--out", default=None, help="write the Markdown here as well as printing it")
    m.set_defaults(fn=cmd_summarize)

    args = parser.parse_args(argv)
    args.parser = sub.choices[args.cmd]  # for argparse-style errors that need more than one option
    try:
        return args.fn(args)
    except GridError as e:  # always a user's grid or selection, never a bug
        raise user_error(str(e)) from None


if __name__ == "__main__":
    raise SystemExit(main())

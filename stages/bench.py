"""Stage: time the model's best kernel and the seed library's kernel per shape against every baseline.

    python -m stages.bench --config configs/default.yaml --samples results/sample --library results/tune \\
        [--before results/sample_pretrained] --out results/bench

Shapes: the config's grid (optionally some classes / the first N), plus every held-out shape the
sample stage was asked for (its evaluated.json; kept kernel or not) and any other shape it kept a kernel
for. Held-out problems are flagged (`heldout`), and summary.md gives them their own table: best-of-k
against the strongest baseline and the library, and the share where the model beats the library: with
another kernel than the library's (hgemm.candidate.code_identity), faster beyond the run's repetition
spread (hgemm.summary.measurably_faster).

Each shape gets its own contenders, through hgemm.bench.run_bench's `select`: `model`
(stages.sample's best/<key>.cu, when it kept one), `before` (with --before, on the held-out shapes: the
best kernel the same prompts drew from the pretrained model) and `library` (what hgemm.matmul serves the
shape with: the exact tuned entry, or the dispatch rule's pick, or on a GPU, where the library sets a
first-call search width, the fastest kernel of that search, hgemm.autotune). With `before`, summary.md and metrics.json say what RL
changed on the held-out shapes: the geomean of the before / after time, with a bootstrap interval.
In results.json each problem names them by role, so the summaries compare roles across shapes.
On a CPU the contenders are compiled, nothing is run, and summary.md and metrics.json say so.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hgemm.bench import run_bench
from hgemm.candidate import code_identity
from hgemm.entry import EvalOptions
from hgemm.library import Library, dispatch_library
from hgemm.pool import visible_gpus
from hgemm.problem import GridError, Problem, load_grid, select_problems
from hgemm.report.tables import before_after, before_after_rows, before_after_table, heldout_rows, heldout_table
from hgemm.summary import geomean, markdown, measurably_faster
from stages.common import atomic_write_text, write_json, write_metrics
from stages.config_schema import load_settings
from training.best_of_k import sampled_kernels

log = logging.getLogger("stages.bench")


@dataclass
class BenchSettings:
    """The `bench:` section (values: configs/default.yaml)."""

    grid: str  # the size/batch grid the report covers
    classes: list | None  # only these shape classes (null: all)
    limit: int | None  # only the first N grid problems (null: all)
    reps: int
    baselines: list | None  # null: the harness's default baselines
    timing_method: str  # hgemm.timing: spin_batch | sustained | events
    arch: str | None  # nvcc target (null: the GPU's)


def library_choice(library_dir: str | Path, problems: list[Problem]):
    """(choose, searched): choose(problem) -> (kernel name, text, how chosen), or None when there is no
    library table; searched: name -> text of every kernel a first-call search timed. What hgemm.matmul
    would serve: on a library with a first-call search width (`autotune`, from the tune stage), the
    search's pick on this GPU for the shapes without an entry; without a GPU, the rule's."""
    if not (Path(library_dir) / "table.json").exists():
        log.warning("no table.json under %s: the library contender is left out", library_dir)
        return (lambda problem: None), {}
    library = Library(library_dir)
    picks, searched = {}, {}
    if library.autotune and visible_gpus():
        from hgemm import ops  # torch's CUDA path and the driver bindings: only where a GPU runs

        searches = ops.autotuned_choices(library, problems, library.autotune)
        picks = {key: search.best for key, search in searches.items()}
        searched = {c.name: c.candidate.source for search in searches.values() for c in search.searched}

    def choose(problem: Problem):
        c = picks.get(problem.key) or library.lookup(problem)
        return c.name, c.candidate.source, c.how

    return choose, searched


def library_kernels(library_dir: str | Path) -> dict[str, str]:
    """code identity -> kernel name for every kernel the library can serve (Library.served: its files and
    the runner-ups its cost rule ranks): a model kernel found here is one of the library's own,
    whichever shape the library gives it."""
    library = dispatch_library(library_dir)
    return {code_identity(text): name for name, text in library.served().items()} if library else {}


def heldout_evaluated(samples_dir: str | Path) -> list[Problem]:
    """The held-out shapes the sample stage evaluated (evaluated.json), whether or not it kept a kernel."""
    path = Path(samples_dir) / "evaluated.json"
    if not path.exists():
        return []
    return [Problem.from_dict(e["problem"]) for e in json.loads(path.read_text()) if e.get("heldout")]


def bench_problems(settings: BenchSettings, sampled: dict[str, tuple[Problem, str]],
                   heldout: list[Problem] = ()) -> list[Problem]:
    problems = select_problems(load_grid(settings.grid), settings.classes, settings.limit, where=settings.grid)
    out = {p.key: p for p in problems}
    for p in list(heldout) + [p for p, _ in sampled.values()]:
        out.setdefault(p.key, p)
    return list(out.values())


def run(settings: BenchSettings, samples_dir: str, library_dir: str, progress: bool = True,
        before_dir: str | None = None) -> dict:
    sampled = sampled_kernels(samples_dir)
    heldout = heldout_evaluated(samples_dir)
    held_keys = {p.key for p in heldout}
    # the pretrained model's kernels are compared on the held-out shapes only: those the report judges
    before = {k: v for k, v in sampled_kernels(before_dir).items() if k in held_keys} if before_dir else {}
    problems = bench_problems(settings, sampled, heldout)
    choose, searched = library_choice(library_dir, problems)
    # a model kernel the library's first-call search timed is the library's too: the search chose another
    held_by_library = library_kernels(library_dir) | {code_identity(text): name for name, text in searched.items()}
    named: dict[str, str] = {}  # unique candidate name -> text: each kernel compiles once
    contenders: dict[str, dict[str, str]] = {}  # shape key -> role -> candidate name
    sources: dict[str, dict] = {}
    for p in problems:
        roles = {}
        if p.key in sampled:
            roles["model"] = f"model_{p.key}"
            named[roles["model"]] = sampled[p.key][1]
        if p.key in before:
            roles["before"] = f"before_{p.key}"
            named[roles["before"]] = before[p.key][1]
        lib = choose(p)
        if lib:
            roles["library"] = f"library_{lib[0]}"
            named[roles["library"]] = lib[1]
        contenders[p.key] = roles
        model_code = code_identity(sampled[p.key][1]) if p.key in sampled else None
        sources[p.key] = {"model": f"best/{p.key}.cu" if "model" in roles else None,
                          "before": str(Path(before_dir) / "best" / f"{p.key}.cu") if "before" in roles else None,
                          "library": lib[0] if lib else None, "library_choice": lib[2] if lib else None,
                          # the model wrote the library's own kernel out: their two timings differ by noise only
                          "model_is_library_kernel": bool(lib and model_code and model_code == code_identity(lib[1])),
                          # the library kernel (for any shape) the model wrote out; None: one the library lacks
                          "model_library_kernel": held_by_library.get(model_code) if model_code else None}
    options = EvalOptions(reps=settings.reps, timing_method=settings.timing_method)
    if settings.baselines:
        options.baselines = tuple(settings.baselines)
    wanted = {(key, name) for key, roles in contenders.items() for name in roles.values()}
    results = run_bench(list(named.items()), problems, options, settings.arch, progress=progress,
                        select=lambda p, name: (p.key, name) in wanted)
    # Rename each problem's contenders to their roles, so "model" and "library" line up across shapes.
    for pr in results["problems"]:
        key = Problem.from_dict(pr["problem"]).key
        by_name = pr["candidates"]
        pr["candidates"] = {role: by_name[name] for role, name in contenders[key].items() if name in by_name}
        pr["kernels"] = sources[key]
        pr["sampled"] = key in sampled
        pr["heldout"] = key in held_keys
    results["grid"] = settings.grid
    results["before"] = str(before_dir) if before_dir else None
    return results


def model_vs_library(results: dict) -> list[dict]:
    """Per shape where both ran: times, the model's speedup over the library kernel, whether it is the
    library's own kernel, and whether it beats it (another kernel, measurably faster) (GPU only)."""
    rows = []
    for pr in results["problems"]:
        c = pr["candidates"]
        m, lib = c.get("model", {}), c.get("library", {})
        if m.get("status") == "ok" and lib.get("status") == "ok" and m.get("time_us") and lib.get("time_us"):
            same = bool((pr.get("kernels") or {}).get("model_is_library_kernel"))
            rows.append({"problem": Problem.from_dict(pr["problem"]).key, "model_us": m["time_us"],
                         "library_us": lib["time_us"], "model_vs_library": lib["time_us"] / m["time_us"],
                         "model_vs_best": m.get("speedup_vs_best"), "library_vs_best": lib.get("speedup_vs_best"),
                         "same_kernel": same, "beats": not same and measurably_faster(m, lib)})
    return rows


def summary_markdown(results: dict) -> str:
    text = markdown(results, title="Best sampled kernel and seed library vs the baselines")
    held = heldout_rows(results)
    if held and results.get("gpu_run"):
        sentence, headers, cells = heldout_table(held)
        text += (f"\n## Held-out shapes\n\n{sentence}\n\n| " + " | ".join(headers) + " |\n|"
                 + "---|" * len(headers) + "\n" + "".join("| " + " | ".join(row) + " |\n" for row in cells))
    if results.get("before") and results.get("gpu_run"):
        sentence, headers, cells = before_after_table(before_after_rows(results))
        text += (f"\n## What RL changed on the held-out shapes\n\n{sentence}\n\n| " + " | ".join(headers) + " |\n|"
                 + "---|" * len(headers) + "\n" + "".join("| " + " | ".join(row) + " |\n" for row in cells))
    rows = model_vs_library(results)
    if rows:
        wins, same = sum(r["beats"] for r in rows), sum(r["same_kernel"] for r in rows)
        text += (f"\n## Model vs seed library\n\nThe model's kernel beats the library's (another kernel, faster beyond "
                 f"the run's repetition spread) on {wins} of {len(rows)} shapes; on {same} it is the library's own "
                 f"kernel (geomean {geomean([r['model_vs_library'] for r in rows]):.3f}x).\n\n"
                 "| shape | model µs | library µs | model vs library | model vs best baseline |\n"
                 "|---|---:|---:|---:|---:|\n")
        text += "".join(f"| {r['problem']} | {r['model_us']:.1f} | {r['library_us']:.1f} | "
                        f"{r['model_vs_library']:.3f}{' (its kernel)' if r['same_kernel'] else ''} | "
                        f"{r['model_vs_best'] or 0:.3f} |\n" for r in rows)
    return text


def bench_metrics(settings: BenchSettings, results: dict, wall_s: float) -> dict:
    def speedups(role: str, sampled_only: bool = False) -> list[float]:
        return [pr["candidates"][role]["speedup_vs_best"] for pr in results["problems"]
                if pr["candidates"].get(role, {}).get("speedup_vs_best") and (pr.get("sampled") or not sampled_only)]

    rows = model_vs_library(results)
    held = heldout_rows(results)
    statuses: dict[str, dict[str, int]] = {}  # role -> status -> shapes, for the roles that ran
    for pr in results["problems"]:
        for role, r in pr["candidates"].items():
            by_status = statuses.setdefault(role, {})
            by_status[r.get("status", "?")] = by_status.get(r.get("status", "?"), 0) + 1
    gpu = bool(results.get("gpu_run"))
    change = before_after(before_after_rows(results)) if results.get("before") else {}
    return {
        "stage": "bench", "settings": asdict(settings), "gpu_run": gpu, "timed": gpu,
        "note": "" if gpu else "compiled, not run: no GPU, so nothing was timed",
        "problems": len(results["problems"]),
        "shapes_with_model_kernel": sum(bool(pr.get("sampled")) for pr in results["problems"]),
        "statuses": statuses,
        "geomean_model_vs_best_baseline": geomean(speedups("model")),
        "geomean_library_vs_best_baseline": geomean(speedups("library")),
        "geomean_model_vs_library": geomean([r["model_vs_library"] for r in rows]),
        "share_model_beats_library": (sum(r["beats"] for r in rows) / len(rows)) if rows else None,
        "shapes_model_wrote_library_kernel": sum(r["same_kernel"] for r in rows),
        "heldout_shapes": len(held),
        "heldout_share_model_beats_library": (sum(r["beats_library"] for r in held) / len(held)
                                              if held and gpu else None),
        # wins with one of the library's own kernels are a better choice among them than its dispatch made
        "heldout_wins_with_a_library_kernel": (sum(r["beats_library"] and r["library_kernel"] is not None
                                                   for r in held) if held and gpu else None),
        "heldout_model_wrote_library_kernel": sum(r["same_kernel"] for r in held),
        "heldout_geomean_model_vs_best_baseline": geomean([r["model_vs_best"] for r in held if r["model_vs_best"]]),
        "heldout_geomean_library_vs_best_baseline": geomean([r["library_vs_best"] for r in held
                                                             if r["library_vs_best"]]),
        "heldout_after_vs_before": change.get("geomean"),
        "heldout_after_vs_before_ci95": change.get("ci95"),
        "heldout_after_vs_before_shapes": change.get("shapes"),
        "wall_s": wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stages.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, action="append",
                    help="experiment config with a 'bench:' section (configs/default.yaml), or YAML with the bench "
                         "settings; repeatable: each file laid over the one before")
    ap.add_argument("--samples", required=True, help="sample stage folder (best.json, best/<shape key>.cu)")
    ap.add_argument("--library", required=True, help="tune stage folder (table.json, kernels/)")
    ap.add_argument("--before", default=None,
                    help="sample stage folder of the pretrained model on the same prompts (what RL is compared with)")
    ap.add_argument("--out", required=True, help="output folder: results.json, summary.md, metrics.json")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one setting (value parsed as YAML); repeatable")
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    settings = load_settings(BenchSettings, "bench", args.config, args.overrides, ap.prog)
    t0 = time.time()
    out = Path(args.out)
    try:
        results = run(settings, args.samples, args.library, progress=not args.no_progress, before_dir=args.before)
    except GridError as e:
        raise SystemExit(f"{ap.prog}: {e}") from None
    # the last run's outputs stay whole until this one has results: from here a stale metrics.json
    # would claim that the files written next belong to a finished run
    (out / "metrics.json").unlink(missing_ok=True)
    write_json(out / "results.json", results)
    atomic_write_text(out / "summary.md", summary_markdown(results))
    metrics = bench_metrics(settings, results, time.time() - t0)
    write_metrics(out, metrics)
    print(f"bench: {metrics['problems']} shapes, {metrics['shapes_with_model_kernel']} with a model kernel"
          f"{'' if metrics['timed'] else ' (compiled, not run: nothing timed)'} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

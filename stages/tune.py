"""Stage: tune the seed kernel families over a size/batch grid into the kernel library.

    python -m stages.tune --config configs/default.yaml --out results/tune

On a GPU the shortlisted variants of every shape are verified and timed against the baselines and
the fastest verified one enters the dispatch table; on a CPU they are compiled only, the table is
empty (the library then dispatches everything to its generic fallback) and metrics.json says so.
With `tune.reuse: [FOLDER, ...]`, libraries tuned earlier that cover the grid are copied (several:
merged, the faster entry kept where two tuned a shape) instead, so a run whose subject is training need
not spend device time on a tune it already has.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass

from hgemm.entry import EvalOptions
from hgemm.library import copy_library, set_autotune
from hgemm.problem import GridError, load_grid, select_problems
from hgemm.summary import geomean
from hgemm.tune import tune
from stages.common import write_metrics
from stages.config_schema import load_settings


@dataclass
class TuneSettings:
    """The `tune:` section (values: configs/default.yaml)."""

    grid: str
    classes: list[str] | None  # empty or null: every class of the grid
    tiles_per_family: int  # distinct tile shapes per family and shape, each at its 2 deepest pipelines
    reps: int
    baselines: list[str]
    reuse: list[str]  # libraries tuned earlier (e.g. benchmarks/tune): copied (several: merged), not tuned again
    autotune: int  # hgemm.matmul's first-call search width, written into the table (hgemm.autotune; 0: none)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stages.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, action="append",
                    help="experiment config with a 'tune' section (configs/default.yaml), or YAML with the tune "
                         "settings; repeatable: each file laid over the one before")
    ap.add_argument("--out", required=True, help="library folder to write (table.json, kernels/, bench.json)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one setting")
    args = ap.parse_args(argv)
    settings = load_settings(TuneSettings, "tune", args.config, args.set, ap.prog)
    try:
        problems = select_problems(load_grid(settings.grid), settings.classes, where=settings.grid)
    except GridError as e:
        raise SystemExit(f"{ap.prog}: {e}") from None
    t0 = time.time()
    if settings.reuse:
        try:
            table = copy_library(settings.reuse, problems, args.out)
        except (ValueError, OSError) as e:
            raise SystemExit(f"{ap.prog}: tune.reuse: {e}") from None
    else:
        table = tune(problems, args.out, EvalOptions(reps=settings.reps, baselines=tuple(settings.baselines)),
                     settings.tiles_per_family)
    table = set_autotune(args.out, settings.autotune)
    vs_best = [e["speedup_vs_best"] for e in table["entries"].values() if e.get("speedup_vs_best")]
    write_metrics(args.out, {
        "settings": asdict(settings), "problems": len(problems), "tuned_shapes": len(table["entries"]),
        "gpu_run": table["gpu_run"], "timed": table["gpu_run"], "reused_from": settings.reuse,
        "note": (f"the libraries tuned earlier in {', '.join(settings.reuse)}, copied" if settings.reuse
                 else "" if table["gpu_run"]
                 else "compiled, not run: no GPU, so nothing was timed and the table is empty"),
        "geomean_speedup_vs_best_baseline": geomean(vs_best), "wall_s": time.time() - t0,
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the timing guards against carried state cost honest kernels (hgemm.rotation).

For every problem of a grid, the reference kernels and the library's choice are evaluated with the
guards on and off, alternating, in one process on one GPU: each kernel's time over cuBLAS's time in
the same evaluation, guarded against unguarded. The guards are outside the timed region except for
where outputs live (one more output than input sets), so the prediction is no change beyond noise:
|ratio - 1| < 2% per kernel and shape.

    python benchmarks/integrity_overhead.py --grid configs/grids/quick.yaml --library benchmarks/tune \
        --out $OUT/integrity_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hgemm.entry import EvalOptions  # noqa: E402
from hgemm.envinfo import environment  # noqa: E402
from hgemm.problem import load_grid  # noqa: E402

REFERENCE = ("smem_tiled", "mma_sync", "mma_pipelined")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default=str(ROOT / "configs/grids/quick.yaml"))
    ap.add_argument("--library", default=str(ROOT / "benchmarks/tune"))
    ap.add_argument("--rounds", type=int, default=2, help="guarded/unguarded pairs per problem")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "integrity_overhead.json"))
    args = ap.parse_args()

    from hgemm.cli import library_candidates
    from hgemm.evaluate import GemmEvaluator
    from hgemm.pool import compile_all

    problems = load_grid(args.grid)
    lib_named, lib_select = library_candidates(args.library, problems)
    named = [(k, (ROOT / f"kernels_corpus/reference/{k}.cu").read_text()) for k in REFERENCE] + lib_named
    compiled = compile_all(named, tuple(sorted({p.layout for p in problems})))
    entries = [e for e, _ in compiled if e is not None]
    evaluator = GemmEvaluator(EvalOptions(reps=args.reps, baselines=("cublas",)))
    rows = []
    for p in problems:
        chosen = [e for e in entries if p.layout in e.cubins and (not e.name.startswith("library:") or lib_select(p, e.name))]
        ratios: dict[str, dict[bool, list[float]]] = {e.name: {True: [], False: []} for e in chosen}
        status = {}
        for _ in range(args.rounds):
            for guarded in (False, True):
                evaluator.options = EvalOptions(reps=args.reps, baselines=("cublas",), fresh_outputs=guarded)
                res = evaluator.run_problem(p, chosen, lambda *a: None)
                cublas = res["baselines"]["cublas"]["timing"]["median_us"]
                for name, r in res["candidates"].items():
                    status.setdefault(name, set()).add(r["status"])
                    if r["status"] == "ok":
                        ratios[name][guarded].append(r["time_us"] / cublas)
        for name, by in ratios.items():
            if by[True] and by[False]:
                change = statistics.median(by[True]) / statistics.median(by[False])
                rows.append({"problem": p.key, "kernel": name, "guarded_over_unguarded": change,
                             "vs_cublas_guarded": by[True], "vs_cublas_unguarded": by[False],
                             "statuses": sorted(status[name])})
            else:
                rows.append({"problem": p.key, "kernel": name, "guarded_over_unguarded": None, "statuses": sorted(status[name])})
    changes = [r["guarded_over_unguarded"] for r in rows if r["guarded_over_unguarded"]]
    out = {"env": environment("spin_batch"), "grid": args.grid, "library": args.library, "rounds": args.rounds,
           "reps": args.reps, "rows": rows,
           "max_abs_change": max(abs(c - 1) for c in changes) if changes else None,
           "within_2pct": sum(abs(c - 1) < 0.02 for c in changes), "measured": len(changes)}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("| problem | kernel | guarded / unguarded (time vs cuBLAS) | statuses |")
    print("|---|---|---:|---|")
    for r in rows:
        c = r["guarded_over_unguarded"]
        print(f"| {r['problem']} | {r['kernel']} | {'—' if c is None else f'{c:.4f}'} | {', '.join(r['statuses'])} |")
    print(f"\n{out['within_2pct']} of {out['measured']} within 2%; largest change {out['max_abs_change']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

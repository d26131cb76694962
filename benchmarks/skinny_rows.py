"""The skinny tensor-core family past one 16-row chunk: every skinny_mma variant (guarded and
realigned loads, both roles) on the held-out shapes with 17 to 64 rows in one role, where its grid.z
walks 16-row chunks that each stream the wide operand again (from L2 when it fits there), in one run
beside a library's choice for each shape (its text in the same folder; `library.json` names it).

    python benchmarks/skinny_rows.py configs/grids/heldout.yaml --library results/pipeline_library \
        --out results/skinny_rows
    python -m hgemm.cli bench --kernels results/skinny_rows/kernels --grid results/skinny_rows/grid.yaml \
        --out benchmarks/skinny_rows/variants/bench.json

(`bash scripts/gpu_skinny_rows.sh` runs both, the library being configs/gpu-rl.yaml's tune.reuse merged.)
Every variant, not a shortlist: this bench came before the family applied past 16 rows
(benchmarks/skinny_rows/variants/: on the few-tile long-K TN shapes 64 x 743 x 491 and 64 x 125 x 2267
a `_pair` variant split over a cluster took 5.6 and 8.3 us, where the library's kernel took 16.4 and
19.8). `shapes` also selects the shapes of benchmarks/skinny_rows/tune_shapes.yaml and heldout.yaml.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hgemm.files import write_json
from hgemm.library import Library
from hgemm.problem import load_grid
from hgemm.shape_sample import grid_text
from kernels_corpus.families import skinny_mma

ROWS = (skinny_mma.MAX_ROWS + 1, 64)  # the atom's rows in one role: past one chunk, up to four


def shapes(grid: str) -> list:
    """The grid's problems with 17 to 64 rows in either role and K past the short-K family's range."""
    lo, hi = ROWS
    return [p for p in load_grid(grid) if p.K >= skinny_mma.MIN_K and (lo <= p.M <= hi or lo <= p.N <= hi)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("grid", help="the grid to take the shapes from (configs/grids/heldout.yaml)")
    ap.add_argument("--library", required=True, help="the library whose choice for each shape is timed beside")
    ap.add_argument("--out", required=True, help="folder for kernels/ (every variant, the library's choices), "
                                                 "grid.yaml and library.json")
    ap.add_argument("--row-groups", type=int, nargs="+", default=None,
                    help="only the variants of these atoms a CTA (1, 2, 4; default: every variant)")
    args = ap.parse_args(argv)
    chosen = shapes(args.grid)
    if not chosen:
        print(f"error: {args.grid}: no shape with {ROWS[0]} to {ROWS[1]} rows in a role", file=sys.stderr)
        return 2
    out = Path(args.out)
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    variants = [p for p in skinny_mma.variants() if args.row_groups is None or skinny_mma.row_groups(p) in args.row_groups]
    for p in variants:
        (out / "kernels" / f"{skinny_mma.name(p)}.cu").write_text(skinny_mma.render(p))
    library, picks = Library(args.library), {}
    for p in chosen:
        choice = library.lookup(p)  # the dispatch rule's pick: hgemm.matmul's before a first-call search
        (out / "kernels" / f"{choice.name}.cu").write_text(choice.candidate.source)
        picks[p.key] = choice.name
    write_json(out / "library.json", {"library": args.library, "choices": picks})
    (out / "grid.yaml").write_text(grid_text(chosen, f"the shapes of {args.grid} with {ROWS[0]} to {ROWS[1]} rows in a role"))
    print(f"{len(variants)} kernels, {len(chosen)} shapes -> {out}: "
          + ", ".join(p.key for p in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())

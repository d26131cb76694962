"""What a zero-fill before every launch costs: the same kernel as it is rendered (`workspace_zero: kept`,
filled once) and with that line taken out (`launch`, the default: filled before every launch), as two
pinned libraries benched side by side in one run (`hgemm bench --library A --library B`).

Per shape of the tunes given (benchmarks/search_headroom/tune timed every variant on the held-out
shapes; a library tune, its shortlist), the fastest verified seed-family kernel with a workspace (a
split-K mma_sync or skinny kernel, a staged wgmma one), where it is within SLOWER of the shape's fastest
kernel: the kernels a tune could choose. A shape two tunes timed keeps the first tune's.

    python benchmarks/workspace_fill.py benchmarks/search_headroom/tune benchmarks/tune --out results/workspace_fill
    python -m hgemm.cli bench --library results/workspace_fill/fill_once --library results/workspace_fill/fill_each \
        --grid results/workspace_fill/grid.yaml --out benchmarks/workspace_fill/bench.json

(`bash scripts/gpu_workspace_fill.sh` runs both after the GPU tests of the kernels and the harness.)
Expected before any run: the fill is a second operation on the stream before every launch, a memset of
1 KB (a staged kernel's barrier counters) up to M x N x 4 bytes (split-K partial sums), so about 1-3 us
less per launch, the same bytes written either way: 7-20% on the shapes whose kernel takes under 20 us
(64 x 743 x 491, 87 x 384 x 1589, 64 x 125 x 2267, 128 x 512 x 7616 and 896 x 147 x 384 among the
held-out ones), under 1% on those above 200 us.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hgemm.candidate import parse_candidate
from hgemm.cost import family_text
from hgemm.library import tune_results
from hgemm.problem import Problem
from hgemm.shape_sample import grid_text
from hgemm.summary import BESIDE

SLOWER = 1.5  # a kernel this much slower than the shape's fastest is one no tune would keep
KEPT_LINE = "workspace_zero: kept\n"


def pairs(searches: list[dict]) -> dict[str, tuple[Problem, str]]:
    """problem key -> (problem, the fastest kernel with a workspace that its family keeps zero)."""
    out = {}
    for pr in (pr for search in searches for pr in search["problems"]):
        p = Problem.from_dict(pr["problem"])
        if p.key in out:
            continue
        timed = {n: r["time_us"] for n, r in pr["candidates"].items()
                 if r.get("status") == "ok" and r.get("time_us") and not n.startswith(BESIDE)}
        kept = {n: t for n, t in timed.items()
                if (text := family_text(n)) is not None and not parse_candidate(text).spec.zero_each_launch}
        if kept and min(kept.values()) <= SLOWER * min(timed.values()):
            out[p.key] = (p, min(kept, key=kept.get))
    return out


def write_library(folder: Path, chosen: dict[str, tuple[Problem, str]], fill_each: bool) -> None:
    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    for _, name in chosen.values():
        text = family_text(name)
        (folder / "kernels" / f"{name}.cu").write_text(text.replace(KEPT_LINE, "") if fill_each else text)
    first = next(iter(chosen.values()))[1]
    entries = {key: {"kernel": name, "source": "pinned", "how": "workspace_fill"} for key, (_, name) in chosen.items()}
    (folder / "table.json").write_text(json.dumps({"fallback": first, "dispatch": "nearest", "entries": entries}, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tunes", nargs="+", help="tune folders (bench.json[.gz]), the first's shapes first")
    ap.add_argument("--out", required=True, help="folder for fill_once/, fill_each/ and grid.yaml")
    args = ap.parse_args(argv)
    searches = []
    for folder in args.tunes:
        if (search := tune_results(folder)) is None:
            print(f"error: {folder}: no bench.json or bench.json.gz", file=sys.stderr)
            return 2
        searches.append(search)
    chosen = pairs(searches)
    if not chosen:
        print(f"error: no shape has a kernel with a workspace within {SLOWER}x of its fastest", file=sys.stderr)
        return 2
    out = Path(args.out)
    write_library(out / "fill_once", chosen, fill_each=False)
    write_library(out / "fill_each", chosen, fill_each=True)
    (out / "grid.yaml").write_text(grid_text([p for p, _ in chosen.values()],
                                             "the shapes of benchmarks/workspace_fill.py's pairs"))
    for key, (_, name) in chosen.items():
        print(f"{key:32s} {name}")
    print(f"{len(chosen)} shapes -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

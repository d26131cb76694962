"""Stage: the kernel library behind `hgemm.matmul`: the tuned seed library, with the shapes where the
model's best kernel beat the library's kernel in the bench stage's run given to the model's kernel.

    python -m stages.library --config configs/default.yaml --bench results/bench --samples results/sample \\
        --tune results/tune --out results/library

Writes table.json and kernels/ (a library folder: hgemm.matmul(..., library="results/library")),
owned.md (the shapes the model now owns, with its speedup over the library kernel it replaces and over
the strongest baseline) and metrics.json. On a CPU nothing was timed, so the model owns no shape and
the library is the tuned one.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from hgemm.library import owned_entries, write_with_entries
from hgemm.summary import geomean
from stages.common import atomic_write_text, write_metrics
from stages.config_schema import load_settings
from training.best_of_k import sampled_kernels


@dataclass
class LibrarySettings:
    """The `library:` section (values: configs/default.yaml)."""

    # the model's kernel takes a shape when the library kernel's time over its own is at least this:
    # above 1, so that timing noise alone does not hand shapes over
    own_margin: float


def owned_markdown(owned: dict[str, dict], timed: bool) -> str:
    if not timed:
        return "# Shapes the model owns\n\nNothing was timed (no GPU), so the model owns no shape.\n"
    lines = ["# Shapes the model owns", "",
             f"{len(owned)} shapes where the model's best kernel beat the library's in the bench stage's run.", ""]
    if owned:
        lines += ["| shape | model µs | vs the library kernel | library kernel | vs strongest baseline |",
                  "|---|---:|---:|---|---:|"]
        lines += [f"| {key} | {e['time_us']:.1f} | {e['speedup_vs_library']:.3f} | {e['library_kernel'] or '—'} | "
                  f"{e['speedup_vs_best'] or 0:.3f} |" for key, e in sorted(owned.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stages.library", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, action="append",
                    help="experiment config with a 'library:' section (configs/default.yaml), or YAML with the "
                         "library settings; repeatable: each file laid over the one before")
    ap.add_argument("--bench", required=True, help="bench stage folder (results.json)")
    ap.add_argument("--samples", required=True, help="sample stage folder (best/<shape key>.cu)")
    ap.add_argument("--tune", required=True, help="tune stage folder (table.json, kernels/)")
    ap.add_argument("--out", required=True, help="library folder to write (table.json, kernels/, owned.md)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one setting")
    args = ap.parse_args(argv)
    settings = load_settings(LibrarySettings, "library", args.config, args.set, ap.prog)
    for folder, name in ((args.bench, "results.json"), (args.tune, "table.json")):
        if not (Path(folder) / name).is_file():
            raise SystemExit(f"{ap.prog}: {folder}: no {name}")
    t0 = time.time()
    results = json.loads((Path(args.bench) / "results.json").read_text())
    owned = owned_entries(results, settings.own_margin)
    sampled = sampled_kernels(args.samples)  # the texts bench timed as `model`
    kernels = {e["kernel"]: sampled[key][1] for key, e in owned.items()}
    out = Path(args.out)
    (out / "metrics.json").unlink(missing_ok=True)
    table = write_with_entries(args.tune, owned, kernels, out)
    timed = bool(results.get("gpu_run"))
    atomic_write_text(out / "owned.md", owned_markdown(owned, timed))
    write_metrics(out, {
        "stage": "library", "settings": asdict(settings), "timed": timed, "shapes": len(table["entries"]),
        "model_owned_shapes": len(owned), "model_owned": sorted(owned),
        "geomean_model_vs_replaced_kernel": geomean([e["speedup_vs_library"] for e in owned.values()]),
        "wall_s": time.time() - t0,
    })
    print(f"library: {len(table['entries'])} shapes, {len(owned)} owned by the model -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

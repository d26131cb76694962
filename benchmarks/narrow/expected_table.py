"""The table of scripts/gpu_narrow_check.sh: per shape of benchmarks/narrow/expected.yaml, the strongest
baseline, the committed library's kernel, the narrow variant the tune measured there before the kernel's
change (its time then, from sample_tune_progress.tgz, and now) and the fastest narrow variant now, marked *
where the family's `applicable` would not give it the shape (an NB below the shape's columns: two or
more column blocks); each time also as the strongest baseline's time of its own run over it.

    python benchmarks/narrow/expected_table.py expected.json
"""

import json
import sys
import tarfile
from pathlib import Path

from hgemm.library import Library
from hgemm.problem import Problem
from kernels_corpus.families import narrow

HERE = Path(__file__).resolve().parent


def before() -> dict[str, dict]:
    """Shape key -> the tune's result of that shape in the archive made before the change."""
    out = {}
    with tarfile.open(HERE / "sample_tune_progress.tgz") as t:
        for m in t.getmembers():
            if "/progress/" in m.name and m.name.endswith(".json"):
                out[Path(m.name).stem] = json.load(t.extractfile(m))["result"]
    return out


def fastest(times: dict[str, float], prefix: str) -> tuple[str, float] | None:
    mine = [(n, us) for n, us in times.items() if n.startswith(prefix)]
    return min(mine, key=lambda nu: nu[1]) if mine else None


def main(path: str) -> None:
    run = json.load(open(path))
    then = before()
    params = {narrow.name(v): v for v in narrow.variants()}
    library = Library(Path("results/committed")) if Path("results/committed").exists() else None
    print("| shape | strongest baseline, µs | library's kernel, µs | narrow kernel before, µs | same kernel now, µs "
          "| fastest narrow now, µs |")
    print("|---|---|---|---|---|---|")
    for res in run["problems"]:
        p = Problem(**res["problem"])
        best = res.get("best_baseline_us")
        if not best:
            print(f"| {p.key} | not timed |")
            continue
        ok = {n: c["time_us"] for n, c in res["candidates"].items() if c.get("status") == "ok"}
        cell = lambda us, ref=best: f"{us:.1f} ({ref / us:.2f}x)"  # noqa: E731
        lib = library.lookup(p).name if library else None
        lib_cell = f"{lib} {cell(ok[lib])}" if lib in ok else "—"
        old = then.get(p.key)
        old_name = old_cell = now_cell = "—"
        if old:
            old_ok = {n: c["time_us"] for n, c in old["candidates"].items() if c.get("status") == "ok"}
            if (f := fastest(old_ok, "narrow")):
                old_name = f[0]
                old_cell = f"{f[0]} {cell(f[1], old['best_baseline_us'])}"
                now_cell = cell(ok[old_name]) if old_name in ok else "not ok"
        new = fastest(ok, "narrow")
        mark = "" if new is None or narrow.applicable(params[new[0]], p) else "*"
        new_cell = f"{new[0]}{mark} {cell(new[1])}" if new else "—"
        print(f"| {p.key} | {res['best_baseline']} {best:.1f} | {lib_cell} | {old_cell} | {now_cell} | {new_cell} |")


if __name__ == "__main__":
    main(sys.argv[1])

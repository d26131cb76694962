"""Cold compile time of header-family instantiations on one core: wall and CPU seconds per compile.

Compiles, one after the other and each with an empty cache, the instantiations with the most SASS
(the most code to compile) and the longest compile times in the equivalence runs
(benchmarks/header_equivalence.py results), through the harness's compile path
(hgemm.compile.compile_candidate). CPU seconds are those of the nvcc process tree, so other load on
the machine does not count; run under `taskset -c 0` for wall seconds on one core.

    taskset -c 0 python -m benchmarks.header_compile_time benchmarks/headers/equivalence_*.json \\
        --pick 4 --out benchmarks/headers/compile_time.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from hgemm.candidate import parse_candidate
from hgemm.compile import compile_candidate, nvcc_version


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="equivalence results files (their rows name the instantiations)")
    ap.add_argument("--pick", type=int, default=4,
                    help="instantiations per family: this many with the most SASS, and this many slowest")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    rows = []
    for path in args.results:
        data = json.loads(Path(path).read_text())
        fam = importlib.import_module(f"kernels_corpus.families.{data['family']}")
        params = {fam.name(p): p for p in fam.variants()}
        big = sorted(data["rows"], key=lambda r: -r.get("instructions_new", 0))[:args.pick]
        slow = sorted(data["rows"], key=lambda r: -r.get("compile_wall_s_new", 0))[:args.pick]
        for r in big + [r for r in slow if r not in big]:
            cand = parse_candidate(fam.render(params[r["variant"]]))
            with tempfile.TemporaryDirectory(prefix="hgemm-ct-") as cache:
                cpu0, t0 = cpu_children(), time.perf_counter()
                res = compile_candidate(cand, r["layout"], arch="sm_90a", cache_dir=cache)
                wall, cpu = time.perf_counter() - t0, cpu_children() - cpu0
            assert res.ok, res.error
            rows.append({"family": data["family"], "variant": r["variant"], "layout": r["layout"],
                         "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
            print(f"{r['variant']:45s} {r['layout']}  wall {wall:5.2f} s  cpu {cpu:5.2f} s")
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    Path(args.out).write_text(json.dumps({
        "command": "python -m benchmarks.header_compile_time " + " ".join(argv or sys.argv[1:]),
        "nvcc": nvcc_version(), "cpus_allowed": affinity, "rows": rows,
        "max_wall_s": max(r["wall_s"] for r in rows), "max_cpu_s": max(r["cpu_s"] for r in rows),
    }, indent=1))


if __name__ == "__main__":
    main()

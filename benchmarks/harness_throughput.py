"""Harness throughput: candidate x shape evaluations per minute, with cold compiles and with cache hits.

The RL stages call the harness for every sampled kernel, so its throughput bounds the RL step rate.
Candidates are real kernels of 40-400 lines (the seed families' variants when importable, else the
reference kernels), each given a unique marker comment per run so the cold phase really compiles.

    python benchmarks/harness_throughput.py --candidates 48 --out $OUT/harness_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hgemm.entry import EvalOptions  # noqa: E402
from hgemm.envinfo import environment  # noqa: E402
from hgemm.problem import Problem  # noqa: E402

PROBLEMS = [Problem(1024, 1024, 1024), Problem(2048, 2048, 1024), Problem(256, 256, 256, 16), Problem(16, 4096, 4096)]


def candidate_texts(n: int, source: str) -> list[tuple[str, str]]:
    pool = []
    if source == "families":
        from kernels_corpus.families import all_variants

        pool = [(name, text) for name, text in all_variants() if "tensor_map" not in text]
    if not pool:
        pool = [(p.stem, p.read_text()) for p in sorted((ROOT / "kernels_corpus/reference").glob("*.cu"))]
    run = uuid.uuid4().hex[:8]
    return [(f"{pool[i % len(pool)][0]}_{i}", f"// throughput run {run} #{i}\n" + pool[i % len(pool)][1]) for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=48, help="distinct candidates to evaluate")
    ap.add_argument("--source", choices=("families", "reference"), default="families",
                    help="seed-family variants, or the reference kernels in kernels_corpus/reference")
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions (RL-reward setting)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "harness_throughput.json"))
    args = ap.parse_args()

    from hgemm.pool import EvaluationPool, compile_all

    os.environ["HGEMM_CACHE"] = tempfile.mkdtemp(prefix="hgemm-throughput-")
    named = candidate_texts(args.candidates, args.source)
    lines = [t.count("\n") for _, t in named]

    t0 = time.perf_counter()
    compiled = compile_all(named, layouts=("NN",))
    cold_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compile_all(named, layouts=("NN",))
    hit_s = time.perf_counter() - t0
    entries = [e for e, _ in compiled if e is not None]

    options = EvalOptions(reps=args.reps, baselines=("cublas",), target_batch_ms=1.0)
    with EvaluationPool(options) as pool:
        pool.run([(Problem(128, 128, 128), entries[:1])])  # worker start-up, outside the measurement
        t0 = time.perf_counter()
        results = pool.run([(p, entries) for p in PROBLEMS])
        eval_s = time.perf_counter() - t0
        gpus = len(pool.gpus)
    n_evals = len(entries) * len(PROBLEMS)
    statuses: dict[str, int] = {}
    for pr in results:
        for r in pr["candidates"].values():
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    report = {
        "env": environment("spin_batch"), "gpus": gpus, "cpu_cores": os.cpu_count(),
        "source": args.source, "candidates": len(named), "compiled": len(entries), "lines_min": min(lines), "lines_max": max(lines),
        "problems": [p.key for p in PROBLEMS], "evaluations": n_evals, "statuses": statuses,
        "cold_compile_s": cold_s, "cache_hit_compile_s": hit_s, "gpu_eval_s": eval_s,
        "compiles_per_min_cold": 60 * len(named) / cold_s,
        "evals_per_min_cold": 60 * n_evals / (cold_s + eval_s),
        "evals_per_min_cache_hit": 60 * n_evals / (hit_s + eval_s),
        "options": options.to_dict(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"candidates {len(named)} ({min(lines)}-{max(lines)} lines), {len(PROBLEMS)} shapes, {gpus} GPU(s), "
          f"{os.cpu_count()} cores; statuses {statuses}")
    print(f"{'phase':<28}{'seconds':>10}{'per minute':>14}")
    print(f"{'cold compile':<28}{cold_s:>10.1f}{60 * len(named) / cold_s:>14.0f}")
    print(f"{'GPU evaluation':<28}{eval_s:>10.1f}{60 * n_evals / eval_s:>14.0f}")
    print(f"{'evals, cold compiles':<28}{cold_s + eval_s:>10.1f}{report['evals_per_min_cold']:>14.0f}")
    print(f"{'evals, cache hits':<28}{hit_s + eval_s:>10.1f}{report['evals_per_min_cache_hit']:>14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

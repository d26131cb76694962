"""The two timing regimes side by side: one bench run with short interleaved batches (`spin_batch`)
and one with each contender held back to back (`sustained`), over the same grid and kernels.

Ratios against the baselines should agree between the regimes (everything is timed alike); absolute
times may not, since sustained work runs at the clocks the GPU can hold. Per shape: the library's
kernel and the strongest baseline in both regimes, their SM clocks, and the speed ratio in both.

    python benchmarks/timing_regimes.py SPIN.json SUSTAINED.json --out timing_regimes.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hgemm.summary import best_candidate_per_problem, clock_cell, geomean, throttled_contenders  # noqa: E402


def _by_key(results: dict) -> dict:
    from hgemm.problem import Problem

    return {Problem.from_dict(pr["problem"]).key: pr for pr in results["problems"]}


def table(spin: dict, sustained: dict) -> str:
    a, b = _by_key(spin), _by_key(sustained)
    best_a, best_b = best_candidate_per_problem(spin), best_candidate_per_problem(sustained)
    lines = ["| shape | kernel µs (spin / sustained) | SM MHz | best baseline µs (spin / sustained) | SM MHz | "
             "vs best (spin / sustained) |", "|---|---:|---:|---:|---:|---:|"]
    slow_k, slow_b, ratio_a, ratio_b = [], [], [], []
    for key in a:
        if key not in b or key not in best_a or key not in best_b:
            continue
        (_, ka), (_, kb) = best_a[key], best_b[key]
        ba, bb = a[key].get("best_baseline"), b[key].get("best_baseline")
        if not ba or not bb:
            continue
        base_a, base_b = a[key]["baselines"][ba], b[key]["baselines"][bb]
        ta, tb = base_a["timing"]["median_us"], base_b["timing"]["median_us"]
        host_bound = kb["timing"].get("host_bound") or base_b["timing"].get("host_bound")
        if not host_bound:  # a host-bound sustained figure holds enqueue gaps: not a clock regime
            slow_k.append(kb["time_us"] / ka["time_us"])
            slow_b.append(tb / ta)
            ratio_a.append(ka.get("speedup_vs_best"))
            ratio_b.append(kb.get("speedup_vs_best"))
        mark = " (host-bound)" if host_bound else ""
        lines.append(f"| {key}{mark} | {ka['time_us']:.1f} / {kb['time_us']:.1f} | {clock_cell(ka.get('timing'))} / "
                     f"{clock_cell(kb.get('timing'))} | {ta:.1f} / {tb:.1f} | {clock_cell(base_a.get('timing'))} / "
                     f"{clock_cell(base_b.get('timing'))} | {ka.get('speedup_vs_best', 0):.3f} / {kb.get('speedup_vs_best', 0):.3f} |")
    head = [
        "# Timing regimes: spin_batch against sustained", "",
        f"- shapes in both runs: {len(lines) - 2}; compared below where no sustained contender was host-bound "
        f"(enqueue slower than the GPU, marked in the table): {len(slow_k)}",
        f"- sustained / spin_batch time, geomean: library kernel {geomean(slow_k):.4f}, strongest baseline {geomean(slow_b):.4f}",
        f"- library vs the strongest baseline, geomean: spin_batch {geomean(ratio_a):.4f}, sustained {geomean(ratio_b):.4f}",
        f"- throttled contenders: spin_batch {len(throttled_contenders(spin))}, sustained {len(throttled_contenders(sustained))}",
        "",
    ]
    return "\n".join(head + lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spin")
    ap.add_argument("sustained")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    md = table(json.loads(Path(args.spin).read_text()), json.loads(Path(args.sustained).read_text()))
    if args.out:
        Path(args.out).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

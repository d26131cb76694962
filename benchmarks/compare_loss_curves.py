"""Two pretraining loss curves side by side: mean train loss per step window and eval loss per eval step.

    python -m benchmarks.compare_loss_curves benchmarks/pretrain/one_gpu/loss_curve.json \\
        benchmarks/pretrain/zero2/loss_curve_170s.json --out benchmarks/pretrain/zero2/comparison.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WINDOWS = ((10, 100), (100, 300), (300, 600), (600, 1000), (1000, 1400))


def compare(a: list[dict], b: list[dict]) -> dict:
    train_a = {r["step"]: r["loss"] for r in a if "loss" in r}
    train_b = {r["step"]: r["loss"] for r in b if "loss" in r}
    eval_a = {r["step"]: r["eval_loss"] for r in a if "eval_loss" in r}
    eval_b = {r["step"]: r["eval_loss"] for r in b if "eval_loss" in r}
    common = sorted(set(train_a) & set(train_b))
    windows = []
    for lo, hi in WINDOWS:
        steps = [s for s in common if lo <= s < hi]
        if steps:
            ma = sum(train_a[s] for s in steps) / len(steps)
            mb = sum(train_b[s] for s in steps) / len(steps)
            windows.append({"steps": [steps[0], steps[-1]], "a": ma, "b": mb, "relative_difference": (mb - ma) / ma})
    evals = [{"step": s, "a": eval_a[s], "b": eval_b[s]} for s in sorted(set(eval_a) & set(eval_b))]
    return {"train_windows": windows, "eval": evals,
            "max_abs_relative_train_difference": max((abs(w["relative_difference"]) for w in windows), default=None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="loss_curve.json (reference)")
    ap.add_argument("b", help="loss_curve.json (compared)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    result = {"a": args.a, "b": args.b} | compare(json.loads(Path(args.a).read_text()), json.loads(Path(args.b).read_text()))
    Path(args.out).write_text(json.dumps(result, indent=1))
    for w in result["train_windows"]:
        print(f"train steps {w['steps'][0]:5d}-{w['steps'][1]:5d}  {w['a']:.3f}  {w['b']:.3f}  {w['relative_difference']:+.1%}")
    for e in result["eval"]:
        print(f"eval  step {e['step']:5d}        {e['a']:.3f}  {e['b']:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The skinny tensor-core family on shapes with 17 to 64 rows in one role, on one GPU:
# `bash scripts/gpu_skinny_rows.sh` (benchmarks/skinny_rows.py says what is expected).
#   1. the family's GPU tests (every variant, the realigned _pair ones included, on its own shapes);
#      TESTS=0 leaves them out (a bench verifies every kernel it times, on its own shapes);
#   2. every variant (ROW_GROUPS="2 4": those of 2 and 4 atoms a CTA) and the pipeline's library's
#      choice for each shape of GRID (configs/gpu-rl.yaml's tune.reuse, merged; default
#      configs/grids/heldout.yaml) benched in one run beside every baseline, every kernel verified.
# Raw results and logs in $OUT; per shape the library's kernel, the family's fastest and the strongest
# baseline last.
GRID=${GRID:-configs/grids/heldout.yaml}
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
if [ "${TESTS:-1}" != 0 ]; then
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py -k skinny_mma \
    > "$OUT/pytest_gpu_families.log" 2>&1
  echo "the family's GPU tests: rc $?"; tail -2 "$OUT/pytest_gpu_families.log"
fi
merge_pipeline_library || exit 1
python3 benchmarks/skinny_rows.py "$GRID" --library results/pipeline_library --out results/skinny_rows \
  ${ROW_GROUPS:+--row-groups $ROW_GROUPS} || exit 1
cp results/skinny_rows/grid.yaml results/skinny_rows/library.json "$OUT/"
timeout 300 python3 -m hgemm.cli bench --kernels results/skinny_rows/kernels --grid results/skinny_rows/grid.yaml \
  --reps 5 --out "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench: rc $?"
python3 - "$OUT/bench.json" results/skinny_rows/library.json <<'PY'
import json, sys
bench, picks = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["choices"]
for pr in bench["problems"]:
    p = pr["problem"]
    key = f"b{p['batch']}_m{p['M']}_n{p['N']}_k{p['K']}_{p['layout']}"
    ok = {n: c["time_us"] for n, c in pr["candidates"].items() if c.get("status") == "ok" and c.get("time_us")}
    fam = {n: t for n, t in ok.items() if n.startswith("skinny_mma")}
    best = min(fam, key=fam.get) if fam else None
    lib = ok.get(picks.get(key))
    print(f"{key:28s} library {lib or float('nan'):7.1f}  family {fam.get(best, float('nan')):7.1f} {best}"
          f"  strongest {pr.get('best_baseline_us') or float('nan'):7.1f}")
PY

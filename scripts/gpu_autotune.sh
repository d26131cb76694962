#!/usr/bin/env bash
# hgemm.matmul's first-call search on shapes no tune saw, on one GPU: `bash scripts/gpu_autotune.sh [K]`
# (GRID=configs/grids/sample_heldout.yaml for the shape sample's held-out split).
#   1. the op's GPU tests on a side stream and with a library that autotunes (tests/test_gpu_ops.py);
#   2. the pipeline's library (configs/gpu-rl.yaml's tune.reuse, merged) pinned on the shapes of GRID
#      (default configs/grids/heldout.yaml, 48 shapes) as the op's search over the dispatch rule's pick and the cost model's
#      first K kernels (default 8) chooses on this GPU (`hgemm pin --autotune K`);
#   3. the library and its pinned search benched in one run beside every baseline, every kernel verified
#      on fresh inputs: what the search gains, measured by the harness rather than by its own timer.
# Raw results and logs in $OUT; the libraries side by side last.
K=${1:-8}
GRID=${GRID:-configs/grids/heldout.yaml}
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 120 python3 -m pytest -m gpu -q tests/test_gpu_ops.py -k "autotune or side_stream" \
  > "$OUT/pytest_gpu_ops.log" 2>&1
echo "the op's GPU tests: rc $?"; tail -2 "$OUT/pytest_gpu_ops.log"
merge_pipeline_library || exit 1
timeout 200 python3 -m hgemm.cli pin results/pipeline_library --grid "$GRID" --autotune "$K" \
  --out results/autotuned > "$OUT/pin_autotune.log" 2>&1
echo "pin --autotune $K: rc $?"; tail -1 "$OUT/pin_autotune.log"
cp results/autotuned/table.json "$OUT/autotuned_table.json" 2>/dev/null
timeout 200 python3 -m hgemm.cli bench --library results/pipeline_library --library results/autotuned \
  --grid "$GRID" --out "$OUT/heldout.json" > "$OUT/heldout.log" 2>&1
echo "held-out bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout.json" --libraries pipeline_library,autotuned \
  --out "$OUT/heldout_libraries.md" | grep "^| all\|^| class\|^| TN"

#!/usr/bin/env bash
# hgemm.matmul's first-call search with stream-K kernels, on one GPU in about three minutes:
# `bash scripts/gpu_streamk_search.sh`
#   1. the op's GPU tests of kernels that keep their workspace zero, stream-K's among them;
#   2. the pipeline's library (configs/gpu-rl.yaml's tune.reuse, merged) pinned on
#      benchmarks/streamk/search_heldout.yaml (the held-out shapes where the search adds a stream-K
#      kernel) as the search chooses on this GPU (`hgemm pin --autotune 8`);
#   3. the library and its pinned search benched in one run beside every baseline.
# Raw results and logs in $OUT; the libraries side by side last.
GRID=benchmarks/streamk/search_heldout.yaml
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 100 python3 -m pytest -m gpu -q tests/test_gpu_ops.py -k "keeps_its_workspace and stk" \
  > "$OUT/pytest_gpu_ops.log" 2>&1
echo "the op's GPU tests: rc $?"; tail -2 "$OUT/pytest_gpu_ops.log"
merge_pipeline_library || exit 1
timeout 150 python3 -m hgemm.cli pin results/pipeline_library --grid "$GRID" --autotune 8 \
  --out results/autotuned > "$OUT/pin_autotune.log" 2>&1
echo "pin --autotune 8: rc $?"; tail -1 "$OUT/pin_autotune.log"
cp results/autotuned/table.json "$OUT/autotuned_table.json" 2>/dev/null
timeout 150 python3 -m hgemm.cli bench --library results/pipeline_library --library results/autotuned \
  --grid "$GRID" --out "$OUT/search.json" > "$OUT/search.log" 2>&1
echo "bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/search.json" --libraries pipeline_library,autotuned \
  --out "$OUT/search_libraries.md" | grep "^| all\|^| class\|^| TN"

#!/usr/bin/env bash
# Kernels that keep their workspace zero (`workspace_zero: kept`), on one GPU: `bash scripts/gpu_workspace_fill.sh`.
#   1. the GPU tests that hold them to it: the families on edge shapes (split-K and staged kernels among
#      them), the harness (every adversarial kernel caught, dirty_workspace included; the candidates of a
#      shape sharing the timing's outputs), and hgemm.matmul serving such kernels call after call, on a
#      side stream and in a replayed graph;
#   2. the same kernels filled once and filled before every launch (benchmarks/workspace_fill.py), benched
#      side by side beside every baseline in one run: what the fill costs.
# Raw results and logs in $OUT; the two libraries side by side last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py tests/test_gpu_harness.py \
  tests/test_gpu_ops.py > "$OUT/pytest_gpu.log" 2>&1
echo "GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu.log"
python3 benchmarks/workspace_fill.py benchmarks/search_headroom/tune benchmarks/tune --out results/workspace_fill \
  > "$OUT/workspace_fill_pairs.txt" || exit 1
tail -1 "$OUT/workspace_fill_pairs.txt"
cp results/workspace_fill/grid.yaml "$OUT/grid.yaml"
timeout 240 python3 -m hgemm.cli bench --library results/workspace_fill/fill_once --library results/workspace_fill/fill_each \
  --grid results/workspace_fill/grid.yaml --out "$OUT/bench.json" > "$OUT/bench.log" 2>&1
echo "bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/bench.json" --libraries fill_once,fill_each --out "$OUT/libraries.md" \
  | grep "^| all\|^| class\|^| TN"

#!/usr/bin/env bash
# hgemm.matmul's first-call search on shapes no tune saw, on one GPU: `bash scripts/gpu_autotune.sh [K]`
# (GRID=configs/grids/sample_heldout.yaml for the shape sample's held-out split; TESTS, the op's GPU
# tests to run first, a pytest -k expression; RUN, the name of the bench's outputs, default heldout;
# SEARCH_TIMERS="stream graph" to pin and bench the search under both of its timers side by side).
#   1. the op's GPU tests on a side stream and with a library that autotunes (tests/test_gpu_ops.py);
#   2. the pipeline's library (configs/gpu-rl.yaml's tune.reuse, merged) pinned on the shapes of GRID
#      (default configs/grids/heldout.yaml, 48 shapes) as the op's search over the dispatch rule's pick and the cost model's
#      first K kernels (default 8) chooses on this GPU (`hgemm pin --autotune K [--search-timer T]`);
#   3. the library and its pinned search benched in one run beside every baseline, every kernel verified
#      on fresh inputs: what the search gains, measured by the harness rather than by its own timer.
# Raw results and logs in $OUT; the libraries side by side last.
K=${1:-8}
GRID=${GRID:-configs/grids/heldout.yaml}
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 120 python3 -m pytest -m gpu -q tests/test_gpu_ops.py -k "${TESTS:-autotune or side_stream or stream_timer}" \
  > "$OUT/pytest_gpu_ops.log" 2>&1
echo "the op's GPU tests: rc $?"; tail -2 "$OUT/pytest_gpu_ops.log"
pin_and_bench_search "$GRID" "$K" "${RUN:-heldout}" || exit 1

#!/usr/bin/env bash
# Stream-K (the wgmma family's `streamk` variants, hgemm/include/hgemm/streamk.cuh) on one GPU, in one
# call of about five minutes: `bash scripts/gpu_streamk.sh`
#   1. the GPU tests: every stream-K variant on its own shapes in both layouts (the harness also holds
#      each to leaving its workspace zero), and a sample of every family on the edge shapes;
#   2. benchmarks/streamk/bench.py on benchmarks/streamk/shapes.yaml: the stream-K variants that apply,
#      each beside its whole-tile twin, and the pipeline library's choice (configs/gpu-rl.yaml's
#      tune.reuse, merged) on each shape, verified and timed beside every baseline in one run.
# `STAGED=1 bash scripts/gpu_streamk.sh`, a second call: step 2 on benchmarks/streamk/shapes_staged.yaml
# (row pitches TMA refuses: the variants behind the staged loader), without the tests.
# Raw results and logs in $OUT; the table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
grid=benchmarks/streamk/shapes.yaml
run=streamk
if [ -n "${STAGED:-}" ]; then
  grid=benchmarks/streamk/shapes_staged.yaml
  run=streamk_staged
else
  timeout 200 python3 -m pytest -m gpu -q tests/test_gpu_families.py -k "streamk or edge_shapes" \
    > "$OUT/pytest_gpu_families.log" 2>&1
  echo "families' GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu_families.log"
fi
merge_pipeline_library || exit 1
timeout 330 python3 benchmarks/streamk/bench.py results/pipeline_library --grid "$grid" \
  --out "$OUT/$run.json" > "$OUT/$run.log" 2>&1
echo "bench: rc $?"
cat "$OUT/$run.md" 2>/dev/null || tail -20 "$OUT/$run.log"

#!/usr/bin/env bash
# One device call (nvidia-h200), the next steps of issues 2 and 3, in the order the later calls need them:
#   1. the harness and task GPU tests (the RL rewards go through GemmEvaluator.checked_launch);
#   2. the torch.compile max-autotune baseline's first run (misaligned quick shapes, where it matters);
#   3. benchmarks.tma_flat_probe: can 1-D TMA boxes feed wgmma from misaligned rows (layout, rate)?
#   4. the seed families re-tuned over the default grid, wgmma included (last: it takes what time is left).
# Usage (GPU machine, repo root): bash scripts/gpu_baselines_tune.sh [TILES] [TUNE_SECONDS]
source scripts/gpu_env.sh
TILES=${1:-2}
TUNE_S=${2:-200}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 140 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 tests/test_gpu_harness.py tests/test_gpu_tasks.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_harness.log" | tail -9
timeout 110 python3 -m hgemm.cli bench --kernels kernels_corpus/reference/mma_sync.cu --grid configs/grids/quick.yaml \
  --classes misaligned --torch-compile --reps 5 --out "$OUT/torch_compile_misaligned.json" 2>&1 | grep -v "it/s\]" | tail -6
timeout 45 python3 -m benchmarks.tma_flat_probe --out "$OUT/tma_flat_probe.json" 2>&1 | tail -12
start=$(date +%s)
timeout "$TUNE_S" python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -4
echo "tune: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
[ -d "$OUT/tune" ] && ( cd "$OUT" && tar czf tune.tgz tune && rm -rf tune )

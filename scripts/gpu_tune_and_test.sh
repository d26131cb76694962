#!/usr/bin/env bash
# One device call: tune the seed families over the default grid (writes the kernel library), then
# every GPU test. Usage (GPU machine, repo root): bash scripts/gpu_tune_and_test.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-3}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 330 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -25
( cd "$OUT" && tar czf tune.tgz tune && rm -rf tune )
timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu.log" | tail -25

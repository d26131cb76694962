#!/usr/bin/env bash
# One device call: tune the seed families over the default grid into a library, bench that library
# on shapes outside the grid (nearest-shape dispatch), and run the family and library GPU tests.
# Usage (GPU machine, repo root): bash scripts/gpu_tune_library.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-3}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 240 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -4
timeout 120 python3 -m hgemm.cli bench --library "$OUT/tune" --grid configs/grids/offgrid.yaml \
  --out "$OUT/library_offgrid.json" --reps 5 2>&1 | grep -v "it/s\]" | tail -16
( cd "$OUT" && tar czf tune.tgz tune && rm -rf tune )
timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py tests/test_gpu_library.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -8

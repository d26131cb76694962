#!/usr/bin/env bash
# One device call (nvidia-h200), the next steps of issues 2 and 3:
#   1. the torch.compile max-autotune baseline's first run (misaligned quick shapes, where it matters);
#   2. benchmarks.tma_flat_probe: can 1-D TMA boxes feed wgmma from misaligned rows (layout, rate)?
#   3. the seed families re-tuned over the default grid, wgmma included, then that library on
#      shapes outside the grid, and the family/library GPU tests.
# Usage (GPU machine, repo root): bash scripts/gpu_baselines_tune.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-3}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m hgemm.cli bench --kernels kernels_corpus/reference/mma_sync.cu --grid configs/grids/quick.yaml \
  --classes misaligned --torch-compile --reps 5 --out "$OUT/torch_compile_misaligned.json" 2>&1 | grep -v "it/s\]" | tail -6
timeout 60 python3 -m benchmarks.tma_flat_probe --out "$OUT/tma_flat_probe.json" 2>&1 | tail -12
timeout 240 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -4
timeout 80 python3 -m hgemm.cli bench --library "$OUT/tune" --grid configs/grids/offgrid.yaml \
  --out "$OUT/library_offgrid.json" --reps 5 2>&1 | grep -v "it/s\]" | tail -6
( cd "$OUT" && tar czf tune.tgz tune && rm -rf tune )
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py tests/test_gpu_library.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -4

#!/usr/bin/env bash
# One device call (nvidia-h200), issue 3's misaligned shapes:
#   1. the family GPU tests, ldg-loader variants always included (every edge shape, NN and TN);
#   2. benchmarks.tma_flat_probe, now with one-row rank-2 maps (the rank-1 maps were refused);
#   3. the library re-tuned over the default grid: the wgmma ldg loader is a candidate wherever TMA
#      cannot go (odd K, or odd N in NN);
#   4. that library on the quick grid's misaligned shapes against every baseline, torch.compile included.
# Usage (GPU machine, repo root): bash scripts/gpu_misaligned.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-2}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider --durations=5 tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -8
timeout 45 python3 -m benchmarks.tma_flat_probe --out "$OUT/tma_flat_probe.json" 2>&1 | tail -12
start=$(date +%s)
timeout 200 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -4
echo "tune: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
[ -d "$OUT/tune" ] && timeout 120 python3 -m hgemm.cli bench --library "$OUT/tune" --grid configs/grids/quick.yaml \
  --classes misaligned --torch-compile --reps 5 --out "$OUT/library_misaligned_tc.json" 2>&1 | grep -v "it/s\]" | tail -8
grep -h "misaligned cubes and one odd dimension |\|Whole grid" "$OUT/tune/goals.md" 2>/dev/null | head -2
[ -d "$OUT/tune" ] && ( cd "$OUT" && tar czf tune.tgz tune && rm -rf tune )

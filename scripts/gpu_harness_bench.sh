#!/usr/bin/env bash
# One device call: the harness's GPU tests, its throughput benchmark, and the three honest kernels
# over the default grid. Usage (GPU machine, repo root): bash scripts/gpu_harness_bench.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_harness.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu.log" | tail -15
timeout 100 python3 benchmarks/harness_throughput.py --source reference --candidates 48 --out "$OUT/harness_throughput.json" 2>&1 | tail -8
timeout 280 python3 -m hgemm.cli bench --kernels kernels_corpus/reference --grid configs/grids/default.yaml \
  --out "$OUT/honest_default.json" --reps 5 2>&1 | grep -v "it/s\]" | head -30

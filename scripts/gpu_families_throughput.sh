#!/usr/bin/env bash
# One device call (nvidia-h200): every family on awkward and TMA-edge shapes (the wgmma family's first
# run), harness throughput on the families' 100-400-line kernels, and the torch.compile baseline.
# Usage (GPU machine, repo root): bash scripts/gpu_families_throughput.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -12
timeout 150 python3 benchmarks/harness_throughput.py --source families --candidates 48 \
  --out "$OUT/harness_throughput_families.json" 2>&1 | tail -7
timeout 120 python3 -m hgemm.cli bench --kernels kernels_corpus/reference/mma_sync.cu --grid configs/grids/quick.yaml \
  --classes misaligned --torch-compile --reps 5 --out "$OUT/torch_compile_misaligned.json" 2>&1 | grep -v "it/s\]" | tail -8

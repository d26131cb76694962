#!/usr/bin/env bash
# Deeper rings for the small tiles' split-K and stream-K kernels, on one GPU: `bash scripts/gpu_deep_ring.sh`
# (benchmarks/deep_ring/). The kernels of benchmarks/deep_ring/make_kernels.py at the family's 6 stages and
# at 8 and 12, verified on fresh random inputs and timed on benchmarks/deep_ring/shapes.yaml beside every
# baseline, after their GPU tests on the edge shapes. Raw results in $OUT; the table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
python3 -m pytest -q -m gpu tests/test_gpu_families.py -k past_six > "$OUT/pytest_gpu.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/pytest_gpu.log")"
python3 benchmarks/deep_ring/make_kernels.py results/deep_ring/kernels > /dev/null || exit 1
timeout 300 python3 -m hgemm.cli bench --kernels results/deep_ring/kernels --grid benchmarks/deep_ring/shapes.yaml \
  --reps 5 --out "$OUT/deep_ring.json" > "$OUT/deep_ring.log" 2>&1
echo "bench: rc $?"
python3 benchmarks/deep_ring/table.py "$OUT/deep_ring.json"

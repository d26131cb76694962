#!/usr/bin/env bash
# One device call: the harness's GPU tests, then the three honest kernels over the smoke grid.
# Usage (on the GPU machine, repo root): bash scripts/gpu_harness_check.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee "$OUT/versions.txt"
import importlib.metadata as md
for p in ("torch", "pycuda", "cupy-cuda13x", "nvmath-python", "cuda-bindings", "transformers", "trl", "datasets"):
    try: print(p, md.version(p))
    except md.PackageNotFoundError: print(p, "missing")
PY
timeout 420 python3 -m pytest -m gpu -q -x -p no:cacheprovider tests/test_gpu_harness.py 2>&1 | tee "$OUT/pytest_gpu.log" | tail -40
timeout 240 python3 -m hgemm.cli bench --kernels kernels_corpus/reference --grid configs/grids/smoke.yaml \
  --out "$OUT/smoke_bench.json" --reps 5 2>&1 | tail -40

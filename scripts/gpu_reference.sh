#!/usr/bin/env bash
# One device call (nvidia-h200, ~200 s): the reference kernels, which the corpus frames for every grid
# problem and the RL policy learns to write whole, reference/mma_pipelined.cu above all.
# Expected (written before the run): mma_pipelined at 4096^3 near the tuned mma_sync family variants
# (453 us, ~300 TFLOP/s: benchmarks/tune/session4/bench.json), so 450-600 us, 7-9x faster than
# reference/mma_sync.cu (3991 us: benchmarks/rl_runs/session6/bench/), the kernel the session-6 policy
# recited. On misaligned shapes an operand whose rows are not 16-byte aligned takes synchronous element
# loads, so there it should fall well below its aligned speed (the tuned mma.sync family: ~1/3).
# Usage (GPU machine, repo root): bash scripts/gpu_reference.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
# correctness first: every honest kernel on the smoke grid and the edge shapes, NN and TN
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_harness.py -k honest 2>&1 \
  | grep -v "PyCUDA WARNING" | tee "$OUT/pytest_gpu_harness.log" | tail -3
# the tensor-core references only: naive and smem_tiled take tens of ms a launch on the large shapes
mkdir -p /tmp/reference_tc && cp kernels_corpus/reference/mma_sync.cu kernels_corpus/reference/mma_pipelined.cu /tmp/reference_tc/
timeout 240 python3 -m hgemm.cli bench --kernels /tmp/reference_tc --grid configs/grids/quick.yaml \
  --reps 5 --out "$OUT/reference.json" 2>&1 | grep -v "it/s\]" | tail -1
python3 - "$OUT/reference.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
names = sorted(b["candidates"])
print("shape".ljust(26), *(n[:13].rjust(14) for n in names), "strongest".rjust(22))
for pr in b["problems"]:
    p, cs = pr["problem"], pr["candidates"]
    key = f"b{p['batch']}_{p['M']}x{p['N']}x{p['K']}_{p['layout']}"
    row = [f"{cs.get(n, {}).get('time_us') or 0:9.1f} {cs.get(n, {}).get('status', '-')[:4]}" for n in names]
    print(key.ljust(26), *(r.rjust(14) for r in row), f"{pr['best_baseline_us']:9.1f} {pr['best_baseline']}".rjust(22))
PY

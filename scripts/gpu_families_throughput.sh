#!/usr/bin/env bash
# One device call (nvidia-h200): the wgmma family's first run (a structured-input probe of its operand
# mapping; generation speed is measured meanwhile, nothing there is timed against it), every GPU test
# (harness incl. adversarial kernels, families on awkward and TMA-edge shapes, tasks, library), harness
# throughput on the families' 100-500-line kernels, and a first wgmma bench.
# Usage (GPU machine, repo root): bash scripts/gpu_families_throughput.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
python3 -c "import cuda.bindings, pycuda, torch; print('cuda.bindings', cuda.bindings.__version__, 'pycuda', pycuda.VERSION, 'torch', torch.__version__)"
# one variant per wgmma tile shape, as candidate files for the bench at the end
python3 -c "
import os
from kernels_corpus.families import wgmma
os.makedirs('/tmp/wgmma', exist_ok=True)
seen = set()
for p in wgmma.variants():
    if (p['bm'], p['bn'], p['consumers']) not in seen:
        seen.add((p['bm'], p['bn'], p['consumers']))
        open(f'/tmp/wgmma/{wgmma.name(p)}.cu', 'w').write(wgmma.render(p))
"
timeout 100 python3 -m benchmarks.generation_speed > "$OUT/generation_speed.log" 2>&1 &
timeout 150 python3 -m benchmarks.wgmma_probe --out "$OUT/wgmma_probe.json" 2>&1 | tee "$OUT/wgmma_probe.log"
wait
tail -5 "$OUT/generation_speed.log"
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_harness.py tests/test_gpu_families.py \
  tests/test_gpu_tasks.py tests/test_gpu_library.py tests/test_params.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" > "$OUT/pytest_gpu.log"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gpu.log" | cut -c1-400 | tail -8
timeout 110 python3 benchmarks/harness_throughput.py --source families --candidates 48 \
  --out "$OUT/harness_throughput_families.json" 2>&1 | tail -6
timeout 90 python3 -m hgemm.cli bench --kernels /tmp/wgmma --grid configs/grids/quick.yaml \
  --classes aligned llm batched_small --reps 5 --out "$OUT/wgmma_quick.json" 2>&1 | grep -v "it/s\]" | tail -14

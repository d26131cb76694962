#!/usr/bin/env bash
# Device calls (nvidia-h200), issue 3: the wgmma family's epilogue.
#
# `bash scripts/gpu_epilogue.sh probe` (~25 s): how much of the kernels' time the epilogue's global stores
# take (benchmarks/epilogue_probe.py: the same kernel with its C stores skipped, never verified).
# Why: after session 8's tune the 128x256 kernel runs 4096^3 at 0.90x cuBLAS and batched 512^3 at
# 0.67-0.71x, and B multicast (benchmarks/cluster/) ruled out L2-to-SM load traffic. The register
# epilogue does not overlap the tensor cores: each consumer stores its 64 x 256 fp16 slab from registers,
# 16 bytes a row a warp instruction, before its next tile's first wgmma.
# Predicted: the stores take 3-5% at 4096^3, 2-3% at 8192^3, 15-25% on batch 64-256 of 512^3.
# Measured (benchmarks/epilogue/epilogue.json): 5.1-8.4% at 4096^3, 4.8-5.5% at 8192^3, 29-39% on
# batch 64-256 of 512^3 and 43-49% at batch 16: without the stores those run faster than cuBLAS.
#
# `bash scripts/gpu_epilogue.sh` (~150 s): the epilogue through shared memory (`epilogue: smem`: the
# consumers park the tile, the producer warpgroup's 3 idle warps store it with 16-byte stores while the
# consumers start the next tile) against the register epilogue, same tiles:
#   1. the family GPU tests, kernels_corpus.families.wgmma.EPILOGUE_SMEM_PROBE among them (odd N, M = 1,
#      batch, clusters, staged copies; NN and TN);
#   2. both epilogues on benchmarks/epilogue/grid.yaml, every baseline but torch.compile.
# Predicted (written before the run): batched 512^3 at batch 64-256 within ~10% of the probe's no-store
# time (b256: 177 -> ~125 us in the harness, b64: 50 -> ~36), batch 16 less (8 tiles a batch entry leave
# the storers little to overlap with); 4096^3 and the LLM shapes 0-4% faster (the ring is one stage
# shallower: s3, where s3 and s4 tied in session 8's tune); odd-N staged shapes (element stores) within
# 3% of the register epilogue's shifted pairs.
# Usage (GPU machine, repo root): bash scripts/gpu_epilogue.sh [probe]
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if [ "${1:-}" = probe ]; then
  timeout 200 python3 -m benchmarks.epilogue_probe --out "$OUT/epilogue.json" 2>&1 | grep -v "PyCUDA WARNING"
  exit
fi
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
mkdir -p /tmp/es_kernels
python3 - <<'PY'
from kernels_corpus.families import wgmma
for p in wgmma.EPILOGUE_SMEM_PROBE:
    # the register epilogue on the same tile, at the ring depth the tune picked in session 8
    regs = {k: v for k, v in p.items() if k != "epilogue"}
    regs["stages"] = {(128, 256): 4, (256, 128): 4, (128, 192): 5, (128, 128): 6, (128, 64): 6}[(p["bm"], p["bn"])]
    for q in (p, regs):
        open(f"/tmp/es_kernels/{wgmma.name(q)}.cu", "w").write(wgmma.render(q))
PY
ls /tmp/es_kernels
timeout 300 python3 -m hgemm.cli bench --kernels /tmp/es_kernels --grid benchmarks/epilogue/grid.yaml \
  --reps 5 --out "$OUT/epilogue_bench.json" 2>&1 | grep -v "it/s\]" | tail -1
python3 scripts/variant_pairs.py "$OUT/epilogue_bench.json" _es

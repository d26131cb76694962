#!/usr/bin/env bash
# One device call (nvidia-h200, ~250 s), issue 3: 2-CTA clusters whose B tile TMA multicasts
# (kernels_corpus/families/wgmma.py, `cluster: 2`), against the same tiles without.
# Why: session 8's tune left the 128x256 kernel at 676 TFLOP/s at 4096^3 (203 us) against cuBLAS's 749
# (183 us), and a 16-byte (not 128-byte) row pitch cost it ~30% (pitch.json), so the loads, not the
# tensor cores, look like the limit. A k-step of a 128x256 tile pulls 48 KB from L2 per SM; multicast
# makes it 32 KB (256x128: 40 of 48).
# Predicted (written before the run): 4096^3 128x256 cl2 185-192 us (from 203), 8192^3 ~1470 (1548),
# LLM shapes 5-9% faster; 256x128 gains about half as much; 16-byte pitches (4104, 8200) gain more than
# aligned ones, since the extra sectors are per load. If the loads are not the limit: within +-2%.
# First run (benchmarks/cluster/session8_membar/): correct, but 0.50-0.73x the plain kernels. The
# consumers' remote arrivals were `.release.cluster`, which ptxas turns into MEMBAR.ALL.GPU before each
# (SASS), two per consumer warp a k-step; now plain arrivals (.release.cta, as CUTLASS's ClusterBarrier).
#   1. the family GPU tests, every cluster tile among them (edge shapes: the pair whose second tile
#      lies past M, tiny grids, batch, NN and TN);
#   2. cluster vs plain on benchmarks/cluster/grid.yaml, every baseline but torch.compile;
#   3. staged cluster vs staged plain on misaligned cubes (benchmarks/cluster/staged_grid.yaml).
# Usage (GPU machine, repo root): bash scripts/gpu_cluster.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
mkdir -p /tmp/cl_kernels /tmp/cl_staged
python3 - <<'PY'
from kernels_corpus.families import wgmma
for p in wgmma.variants():
    if p.get("cluster", 1) > 1:
        plain = {k: v for k, v in p.items() if k != "cluster"}
        d = "/tmp/cl_staged" if p.get("loader") == "staged" else "/tmp/cl_kernels"
        if d == "/tmp/cl_kernels" and p["stages"] < 4 and p["bn"] != 256:
            continue   # one ring depth a tile but 128x256's two
        for q in (p, plain):
            open(f"{d}/{wgmma.name(q)}.cu", "w").write(wgmma.render(q))
PY
ls /tmp/cl_kernels /tmp/cl_staged
timeout 240 python3 -m hgemm.cli bench --kernels /tmp/cl_kernels --grid benchmarks/cluster/grid.yaml \
  --reps 5 --out "$OUT/cluster.json" 2>&1 | grep -v "it/s\]" | tail -1
timeout 120 python3 -m hgemm.cli bench --kernels /tmp/cl_staged --grid benchmarks/cluster/staged_grid.yaml \
  --reps 5 --out "$OUT/cluster_staged.json" 2>&1 | grep -v "it/s\]" | tail -1
for f in "$OUT/cluster.json" "$OUT/cluster_staged.json"; do
  python3 scripts/variant_pairs.py "$f" _cl2
done

#!/usr/bin/env bash
# One device call (nvidia-h200), issue 3: the wgmma ldg loader (shapes whose row pitch TMA refuses).
# First run (session 4, benchmarks/ldg_loader/session4_first/): ~91 TFLOP/s at 4095^3 with 2, 4 or 8
# segments in flight per lane (b2 only 1.23x slower than b4, b8 2% faster): not latency-bound. SASS
# showed the producers issue-bound: 582 static instructions in the stage loop (a 64-bit segment decode
# twice per 16-byte chunk), with 2 producer warps per scheduler. Two fixes, compiled and CPU-tested:
#   walk  (SegmentWalk: one decode per tile, then strides; 32-bit bounds): 376 static instructions;
#   pair  (walk, plus every lane loads the block after its own: no shuffles): 338.
# Expected if issue-bound: walk ~1.4x and pair ~1.6x the first loader (4095^3: 1490 -> ~1050 / ~900 us).
# This run: the family GPU tests (edge shapes, NN and TN; ldg b4 shfl and pair included), then the
# first loader (committed, renamed *_per_chunk_decode) against walk and pair (b4, b8; 4 and 6 stages)
# on every misaligned shape of the default grid, all in one run with every baseline.
# Usage (GPU machine, repo root): bash scripts/gpu_ldg_loader.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
mkdir -p "$OUT/kernels"
cp benchmarks/ldg_loader/kernels/*.cu "$OUT/kernels/"
python3 - "$OUT/kernels" <<'PY'
import sys
from kernels_corpus.families import wgmma
for st, lb, ra in [(4, 4, "shfl"), (4, 4, "pair"), (4, 8, "pair"), (6, 4, "pair")]:
    p = dict(bm=128, bn=128, consumers=2, stages=st, group_m=8, loader="ldg", ldg_batch=lb, realign=ra)
    open(f"{sys.argv[1]}/{wgmma.name(p)}.cu", "w").write(wgmma.render(p))
PY
timeout 150 python3 -m hgemm.cli bench --kernels "$OUT/kernels" --grid configs/grids/default.yaml \
  --classes misaligned --reps 5 --out "$OUT/ldg_loader.json" 2>&1 | grep -v "it/s\]" | tail -1
python3 - "$OUT/ldg_loader.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
names = sorted(b["candidates"])
print("shape".ljust(16), *(n.split("_g8_")[-1][:16].ljust(17) for n in names), "strongest")
for pr in b["problems"]:
    p, cs = pr["problem"], pr["candidates"]
    row = [f"{cs.get(n, {}).get('time_us') or 0:9.1f} {cs.get(n, {}).get('status', '-')[:4]}" for n in names]
    print(f"{p['M']}x{p['N']}x{p['K']}".ljust(16), *(r.ljust(17) for r in row),
          f"{pr['best_baseline_us']:9.1f} {pr['best_baseline']}")
PY

#!/usr/bin/env bash
# One device call (nvidia-h200), issue 3: the loaders for rows TMA refuses (K % 8, or N % 8 in NN).
# 1. The wgmma ldg loader. First run (session 4, benchmarks/ldg_loader/session4_first/): ~91 TFLOP/s at
#    4095^3 whether 2, 4 or 8 segments were in flight per lane: not latency-bound. SASS: the producers
#    are issue-bound, 582 static instructions in the stage loop (a 64-bit segment decode twice per
#    16-byte chunk, 2 producer warps per scheduler). Fixes, compiled and CPU-tested:
#      walk (SegmentWalk: one decode per tile, then strides; 32-bit bounds): 376 instructions;
#      pair (walk, plus every lane loads the block after its own: no shuffles): 338.
#    Expected if issue-bound: walk ~1.4x, pair ~1.6x the first loader (4095^3: 1490 -> ~1050 / ~900 us).
# 2. The mma.sync fallback, which wins every misaligned shape today (~95 TFLOP/s at 4095^3): element
#    loads (8 LDG.U16 per 16-byte chunk: 144 in the 64x128 kernel) against pair loads (2 LDG.128 and a
#    register realignment: 36 LDG, about as many instructions in all). Faster only if the LSU is the
#    bound; the run says.
# This run: the family GPU tests (edge shapes, NN and TN; the pair options included), then all of the
# above on the 11 misaligned shapes of the default grid, in one run with every baseline.
# Usage (GPU machine, repo root): bash scripts/gpu_misaligned_loaders.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
mkdir -p "$OUT/kernels"
# the first loader, as session 4 timed it, renamed so it can stand beside today's b4
sed 's/wgmma_128x128x64_c2_s4_g8_ldgb4/wgmma_128x128x64_c2_s4_g8_ldgb4_per_chunk_decode/g' \
  benchmarks/ldg_loader/session4_first/kernels/wgmma_128x128x64_c2_s4_g8_ldgb4.cu \
  > "$OUT/kernels/wgmma_128x128x64_c2_s4_g8_ldgb4_per_chunk_decode.cu"
python3 - "$OUT/kernels" <<'PY'
import sys
from kernels_corpus.families import mma_sync, wgmma
for st, lb, ra in [(4, 4, "shfl"), (4, 4, "pair"), (4, 8, "pair"), (6, 4, "pair")]:
    p = dict(bm=128, bn=128, consumers=2, stages=st, group_m=8, loader="ldg", ldg_batch=lb, realign=ra)
    open(f"{sys.argv[1]}/{wgmma.name(p)}.cu", "w").write(wgmma.render(p))
# the mma.sync variants session 4's tune picked for the misaligned shapes, with both loaders
winners = {"mma_sync_64x64x32_w2x2_s4_g8_sk1", "mma_sync_128x128x32_w2x4_s3_g8_sk1",
           "mma_sync_64x128x32_w2x2_s4_g8_sk1", "mma_sync_64x128x32_w2x2_s3_g8_sk1"}
for p in (v for v in mma_sync.variants() if mma_sync.name(v) in winners):
    for loads in ("elem", "pair"):
        q = dict(p, misaligned_loads=loads)
        open(f"{sys.argv[1]}/{mma_sync.name(q)}.cu", "w").write(mma_sync.render(q))
PY
timeout 240 python3 -m hgemm.cli bench --kernels "$OUT/kernels" --grid configs/grids/default.yaml \
  --classes misaligned --reps 5 --out "$OUT/misaligned_loaders.json" 2>&1 | grep -v "it/s\]" | tail -1
python3 - "$OUT/misaligned_loaders.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
names = sorted(b["candidates"])
print("shape".ljust(16), *(n.replace("wgmma_128x128x64_c2_", "wg_").replace("mma_sync_", "ms_")[:17].ljust(18)
                           for n in names), "strongest")
for pr in b["problems"]:
    p, cs = pr["problem"], pr["candidates"]
    row = [f"{cs.get(n, {}).get('time_us') or 0:9.1f} {cs.get(n, {}).get('status', '-')[:4]}" for n in names]
    print(f"{p['M']}x{p['N']}x{p['K']}".ljust(16), *(r.ljust(18) for r in row),
          f"{pr['best_baseline_us']:9.1f} {pr['best_baseline']}")
PY

#!/usr/bin/env bash
# One device call (nvidia-h200, ~300 s): the wgmma staged loader (issue 3). The grid first copies A and
# B into the workspace with rows padded to 16 bytes, then the TMA kernel runs on the copies
# (kernels_corpus/families/wgmma.py, loader: staged). Expected at 4095^3, from session 5's figures:
# copy ~45 us (134 MB moved; the harness does not memset the staged copies) + the TMA kernel at 4096^3
# (~200 us) = ~250 us, against 754 us for the best ldg loader, 300 us for pad8_cublas and ~216 us for
# torch.compile max-autotune (benchmarks/baselines/). Measured in session 6: 280 us
# (benchmarks/ldg_loader/session6_staged/), and the staged variants replaced the ldg loader's.
# Predicted in session 6 for the one-operand variants (stage: A or B): ~40 us less than copying both
# on 4096x4096x4095 (239 -> ~200 us) and 4096x4095x4096 (280 -> ~240).
# This run: the family GPU tests (edge shapes, NN and TN, staged and ldg loaders included), then the
# staged variants beside the ldg loader's best on the misaligned shapes, with every baseline, then staged
# against plain TMA on the aligned quick-grid shapes, to isolate the cost of the copies (~240 s).
# A one-operand variant reports `unsupported` on the shapes where the other operand's rows are refused.
# Usage (GPU machine, repo root): bash scripts/gpu_staged.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
mkdir -p /tmp/staged_kernels
python3 - /tmp/staged_kernels <<'PY'
import sys
from kernels_corpus.families import wgmma
staged = [p for p in wgmma.variants() if p.get("loader") == "staged"]
for p in [wgmma.LDG_BEST, *staged]:
    open(f"{sys.argv[1]}/{wgmma.name(p)}.cu", "w").write(wgmma.render(p))
# the same tiles without staging, for the aligned run below
for p in staged:
    if p["stage"] == "AB":
        plain = {k: v for k, v in p.items() if k not in ("loader", "stage")}
        open(f"{sys.argv[1]}/{wgmma.name(plain)}.cu", "w").write(wgmma.render(plain))
PY
# the 11 misaligned default-grid shapes against every baseline but torch.compile (minutes of autotuning
# a shape; session 6 ran it: benchmarks/ldg_loader/session6_staged/staged_tc.json)
timeout 200 python3 -m hgemm.cli bench --kernels /tmp/staged_kernels --grid configs/grids/default.yaml \
  --classes misaligned --reps 5 --out "$OUT/staged.json" 2>&1 | grep -v "it/s\]" | tail -1
# Where the staged kernel's time goes: on aligned shapes a staged kernel copies rows that need no pad, so
# staged minus plain (same tile) is the cost of the copies and the grid barrier (~80 us at 4095^3 in
# session 6, against ~35 us for moving 134 MB at the copy bandwidth)
timeout 120 python3 -m hgemm.cli bench --kernels /tmp/staged_kernels --grid configs/grids/quick.yaml \
  --classes aligned --reps 5 --out "$OUT/staged_aligned.json" 2>&1 | grep -v "it/s\]" | tail -1
for f in "$OUT/staged.json" "$OUT/staged_aligned.json"; do
python3 - "$f" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
names = sorted(b["candidates"])
short = {n: n.replace("wgmma_", "").replace("x64_c2", "").replace("_g8", "") for n in names}
print("shape".ljust(16), *(short[n].ljust(20) for n in names), "strongest")
for pr in b["problems"]:
    p, cs = pr["problem"], pr["candidates"]
    row = [f"{cs.get(n, {}).get('time_us') or 0:9.1f} {cs.get(n, {}).get('status', '-')[:4]}" for n in names]
    print(f"{p['M']}x{p['N']}x{p['K']}".ljust(16), *(r.ljust(20) for r in row),
          f"{pr['best_baseline_us']:9.1f} {pr['best_baseline']}")
PY
done

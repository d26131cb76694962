#!/usr/bin/env bash
# The seed library tuned over the default grid on one H200 (~400 s; the timeouts add up to 620 s, 575 with
# PITCH=0, which fits a 600-s device call):
#   1. the family GPU tests: edge shapes (odd N among them), NN and TN;
#   2. the plain TMA kernel on aligned shapes that differ only in row pitch (16-byte against 128-byte
#      multiples, benchmarks/row_pitch/pitch_grid.yaml; PITCH=0 skips it): benchmarks/row_pitch/;
#   3. `hgemm tune` over the default grid, TILES tiles a family (default 2), with goals.md against
#      the per-class goals: the library in $OUT/tune (packed as tune.tgz), committed as benchmarks/tune/;
#   4. the library GPU tests (hgemm.matmul on random shapes);
#   5. the tuned library on the quick grid's misaligned shapes with torch.compile max-autotune, the
#      baseline that is strongest there (library_misaligned_tc.json).
# Usage (GPU machine, repo root): [PITCH=0] bash scripts/gpu_library.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-2}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
# In order of what must not be lost if the run is cut short: the tune writes nothing until it ends, so
# the cheap steps go first and torch.compile's autotuning (the most variable) last.
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
if [ "${PITCH:-1}" = 1 ]; then
mkdir -p /tmp/pitch_kernels
python3 - /tmp/pitch_kernels <<'PY'
import sys
from kernels_corpus.families import wgmma
for p in [dict(bm=128, bn=256, consumers=2, stages=4, group_m=8), dict(bm=256, bn=128, consumers=2, stages=4, group_m=8)]:
    open(f"{sys.argv[1]}/{wgmma.name(p)}.cu", "w").write(wgmma.render(p))
PY
timeout 45 python3 -m hgemm.cli bench --kernels /tmp/pitch_kernels --grid benchmarks/row_pitch/pitch_grid.yaml \
  --reps 5 --out "$OUT/pitch.json" 2>&1 | grep -v "it/s\]" | tail -1
python3 - "$OUT/pitch.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for pr in b["problems"]:
    p, cs = pr["problem"], pr["candidates"]
    flop = 2 * p["M"] * p["N"] * p["K"]
    row = "  ".join(f"{n[6:13]} {c['time_us']:8.1f} us {flop / c['time_us'] / 1e6:5.0f} TF/s" for n, c in sorted(cs.items())
                    if c.get("time_us"))
    print(f"{p['M']}x{p['N']}x{p['K']}".ljust(16), row, f"| cublas {pr['best_baseline_us']:.1f}")
PY
fi
start=$(date +%s)
timeout 300 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out "$OUT/tune" --tiles "$TILES" --reps 5 \
  2>&1 | grep -v "it/s\]" | tail -2
echo "tune: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
# the library's GPU tests: hgemm.matmul dispatch and correctness on random shapes
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_library.py 2>&1 \
  | grep -v "PyCUDA WARNING" | tee "$OUT/pytest_gpu_library.log" | tail -2
grep -h "^| [a-zA-Z]" "$OUT/tune/goals.md" 2>/dev/null | head -7
grep -h "Whole grid" "$OUT/tune/goals.md" 2>/dev/null
[ -d "$OUT/tune" ] && ( cd "$OUT" && tar czf tune.tgz tune )
[ -d "$OUT/tune" ] && timeout 95 python3 -m hgemm.cli bench --library "$OUT/tune" --grid configs/grids/quick.yaml \
  --classes misaligned --torch-compile --reps 5 --out "$OUT/library_misaligned_tc.json" 2>&1 | grep -v "it/s\]" | tail -1
rm -rf "$OUT/tune"

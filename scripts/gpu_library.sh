#!/usr/bin/env bash
# One device call (nvidia-h200, ~350 s; the timeouts add up to 560 s), issue 3: the seed library re-tuned
# over the default grid, the first full re-tune since the staged loader replaced the ldg one (session 4's:
# benchmarks/tune/session4/).
#   1. the family GPU tests: edge shapes (odd N among them), NN and TN. They check the wgmma epilogue
#      written in session 7, which stores 4-byte pairs on rows that start 2 bytes off (N odd);
#   2. the plain TMA kernel on aligned shapes that differ only in row pitch (16-byte against 128-byte
#      multiples, benchmarks/ldg_loader/pitch_grid.yaml). Session 7 left 8193^3 1.53x slower than 8191^3,
#      of which the tile rounds explain 1.06x; the staged copies there had 16-byte, not 128-byte, row
#      pitches. If that is the cause, 4096x4104x4104 runs >= 20% slower a flop than 4096x4160x4160
#      (same tile counts and k-tiles); if not, within ~3%;
#   3. `hgemm tune` over the default grid, 2 tiles a family (session 4: 134 s; the reference kernels are
#      now timed on every shape too), with goals.md against issue 3's goals;
#   4. the library GPU tests (hgemm.matmul on random shapes);
#   5. the tuned library on the quick grid's misaligned shapes with torch.compile max-autotune, the
#      baseline that is strongest there (219.7 us at 4095^3, benchmarks/ldg_loader/session6_staged/).
# Expected (written before the run), from session 7's staged.json (benchmarks/ldg_loader/
# session7_one_operand/) less the ~42 us (at 4096^2 outputs, in proportion to M x N elsewhere) that the
# old epilogue's 2-byte stores cost on odd-N shapes:
#   4095^3 ~242 us (1.25x pad8_cublas), 4096x4095x4096 ~224 (1.26x), 8191^3 ~1670 (1.16x),
#   2047^3 ~50 (1.26x); 4096x4096x4095 unchanged at ~222 (1.16x), now that the tune's estimate ranks
#   the one-operand copy first (hgemm.tune.estimate). The +1 cubes lose a tile round besides: with
#   128x192 tiles (new; shortlisted on 2049^3 and 4097^3) 2049^3 ~64 us (1.02x) and
#   4097^3 ~336 (0.96x); 8193^3 ~2630 (0.76x) stays the worst. Misaligned class geomean ~1.0x the
#   strongest baseline without torch.compile (session 4: 0.30). The staged copies' rows are now padded
#   to 128 bytes (hgemm.params.STAGED_PITCH): if step 2 finds the 16-byte pitches slow, the +1 cubes
#   gain that too, beyond the figures above.
# Measured in session 8's first call (benchmarks/tune/session8a/, the pitch probe in
# benchmarks/ldg_loader/session8_pitch/): the family tests pass; 4095^3 252.6 us (1.20x), 4096x4095x4096
# 232.1 (1.20x), 8191^3 1755.6, 2049^3 64.2, 2047^3 49.6; the 128-byte staged pitch took 4097^3 from 410.7
# to 288.6 and 8193^3 from 2802 to 1849.5 (1.08x): the 16-byte pitches were the cause, as step 2 showed
# (4096x4104x4104 at 440 TFLOP/s against 575-674 at 4160). Misaligned class 1.098x the strongest.
# Second run (PITCH=0), after the epilogue through shared memory became the family's default
# (benchmarks/epilogue/session8/). Predicted: 4096^3 ~191 us (0.98x cuBLAS), 8192^3 ~1.0x, 2048^3 ~0.91x;
# batched class 0.80 -> ~0.95x cuBLAS; misaligned class ~1.13x (4095^3 ~237 us); whole grid ~1.08x cuBLAS.
# Measured (benchmarks/tune/): 4096^3 182.2 us (0.98x), 8192^3 1.00x, 2048^3 0.89x; batched
# class 0.893x cuBLAS; misaligned 1.151x (4095^3 233.1 us); whole grid 1.099x cuBLAS, 0.928x the
# strongest. Third run: wgmma split-K (SPLIT_TILES) for the skinny shapes. Predicted: M = 16 and 64 at
# 4096 x 4096 ~12-14 us (from 21.2 and 23.0; cuBLAS 13.7 and 12.7), the skinny class 0.61 -> ~0.75 of the
# copy bandwidth, whole grid ~1.12x cuBLAS. Measured (benchmarks/tune/session8c_splitk/): refuted, slower
# than not splitting on every skinny shape (64 x 4096 x 4096: 35.4 us); split-K left variants().
# Usage (GPU machine, repo root): [PITCH=0] bash scripts/gpu_library.sh [TILES]
source scripts/gpu_env.sh
TILES=${1:-2}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
# In order of what must not be lost if the call runs long: the tune writes nothing until it ends, so
# the cheap steps go first and torch.compile's autotuning (the most variable) last.
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_families.py 2>&1 \
  | grep -v "PyCUDA WARNING\|failed: an illegal" | tee "$OUT/pytest_gpu_families.log" | tail -3
if [ "${PITCH:-1}" = 1 ]; then
mkdir -p /tmp/pitch_kernels
python3 - /tmp/pitch_kernels <<'PY'
import sys
from kernels_corpus.families import wgmma
for p in [dict(bm=128, bn=256, consumers=2, stages=4, group_m=8), dict(bm=256, bn=128, consumers=2, stages=4, group_m=8)]:
    open(f"{sys.argv[1]}/{wgmma.name(p)}.cu", "w").write(wgmma.render(p))
PY
timeout 45 python3 -m hgemm.cli bench --kernels /tmp/pitch_kernels --grid benchmarks/ldg_loader/pitch_grid.yaml \
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

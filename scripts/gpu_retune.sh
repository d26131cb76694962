#!/usr/bin/env bash
# Both tunes again where today's shortlists differ from the wgmma 64-row tunes' (benchmarks/wgmma_64_rows:
# the narrow family, the skinny kernels with 8 loads in flight), then the libraries judged on the
# held-out shapes the narrow family serves. One call of up to ~9 minutes on one H200; a tune whose
# budget runs out saves its chunks and says so, and the script stops: call it again on the same machine
# and it goes on.
#   1. the default grid (as scripts/gpu_library.sh tunes it) and the shape sample's fitting part (as the
#      sample tune ran, beside the committed library), each resumed from its wgmma_64_rows folder: a
#      shape whose shortlist is unchanged keeps its saved result, the others are measured again;
#   2. three libraries side by side with every baseline on benchmarks/narrow/heldout_narrow.yaml: the
#      committed one (benchmarks/tune + benchmarks/sample_tune), the wgmma 64-row one and the re-tuned one,
#      so that the last two differ by today's kernels alone.
# Verify the families first, in their own call: python3 -m pytest -m gpu -q tests/test_gpu_families.py
# Raw results and logs in $OUT (default_tune.tgz, sample_tune.tgz: the re-tuned folders); a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
rows=benchmarks/wgmma_64_rows
# --max-seconds counts the compiles and starts no chunk of 16 shapes that would not fit; the timeouts
# are backstops
timeout 200 python3 -m hgemm.cli tune --grid configs/grids/default.yaml --out results/default_tune --tiles 2 --reps 5 \
  --resume-from $rows/default_tune --max-seconds 170 > "$OUT/default_tune.log" 2>&1
echo "default tune: rc $?"
tar czf "$OUT/default_tune.tgz" results/default_tune
grep -q "still to tune" "$OUT/default_tune.log" && { grep "still to tune" "$OUT/default_tune.log"; exit 0; }
grep -h "^| [a-zA-Z]\|Whole grid" results/default_tune/goals.md | head -8
timeout 220 python3 -m hgemm.cli tune --grid configs/grids/sample_fit.yaml --out results/sample_tune --tiles 1 \
  --beside benchmarks/tune --resume-from $rows/sample_tune --max-seconds 190 > "$OUT/sample_tune.log" 2>&1
echo "sample tune: rc $?"
tar czf "$OUT/sample_tune.tgz" results/sample_tune
grep -q "still to tune" "$OUT/sample_tune.log" && { grep "still to tune" "$OUT/sample_tune.log"; exit 0; }
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
python3 -m hgemm.cli merge $rows/default_tune $rows/sample_tune --out results/rows64 > /dev/null || exit 1
python3 -m hgemm.cli merge results/default_tune results/sample_tune --out results/retuned > /dev/null || exit 1
timeout 150 python3 -m hgemm.cli bench --library results/committed --library results/rows64 --library results/retuned \
  --grid benchmarks/narrow/heldout_narrow.yaml --out "$OUT/heldout_narrow.json" > "$OUT/heldout_narrow.log" 2>&1
echo "held-out narrow bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout_narrow.json" --libraries committed,rows64,retuned \
  --out "$OUT/heldout_narrow_libraries.md" | grep "^| all\|^| class"

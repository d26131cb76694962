#!/usr/bin/env bash
# The narrow family on one H200: tuned where it enters the shortlists, and judged on the held-out
# shapes it serves. One call of up to ~9 minutes; if the tune's budget runs out first, call it again on
# the same machine and it goes on from the saved chunks.
#   1. the shape sample's fitting part re-tuned from benchmarks/wgmma_64_rows/sample_tune (the tune of
#      today's other shortlists): only the shapes whose shortlist the family changed (N <= 16, and TN
#      with M <= 16) are measured again, the rest keep their saved results;
#   2. once no shape is pending, three libraries side by side with every baseline on
#      benchmarks/narrow/heldout_narrow.yaml: the committed one (benchmarks/tune + benchmarks/sample_tune),
#      the wgmma 64-row one (benchmarks/wgmma_64_rows) and that one with the re-tune, so that the last
#      two differ by the narrow family alone.
# Verify the family first, in its own call: python3 -m pytest -m gpu -q tests/test_gpu_families.py
# Raw results and logs in $OUT (sample_tune.tgz: the re-tuned folder); a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
# --max-seconds counts the compiles and starts no chunk of 16 shapes that would not fit; the timeout
# is a backstop
timeout 330 python3 -m hgemm.cli tune --grid configs/grids/sample_fit.yaml --out results/sample_tune --tiles 1 \
  --beside benchmarks/tune --resume-from benchmarks/wgmma_64_rows/sample_tune --max-seconds 300 > "$OUT/sample_tune.log" 2>&1
echo "sample tune: rc $?"
tar czf "$OUT/sample_tune.tgz" results/sample_tune
grep -q "still to tune" "$OUT/sample_tune.log" && { grep "still to tune" "$OUT/sample_tune.log"; exit 0; }
rows=benchmarks/wgmma_64_rows
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
python3 -m hgemm.cli merge $rows/default_tune $rows/sample_tune --out results/rows64 > /dev/null || exit 1
python3 -m hgemm.cli merge $rows/default_tune results/sample_tune --out results/narrow > /dev/null || exit 1
timeout 200 python3 -m hgemm.cli bench --library results/committed --library results/rows64 --library results/narrow \
  --grid benchmarks/narrow/heldout_narrow.yaml --out "$OUT/heldout_narrow.json" > "$OUT/heldout_narrow.log" 2>&1
echo "held-out narrow bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout_narrow.json" --libraries committed,rows64,narrow \
  --out "$OUT/heldout_narrow_libraries.md" | grep "^| all\|^| class"

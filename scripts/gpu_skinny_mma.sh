#!/usr/bin/env bash
# The skinny tensor-core family (kernels_corpus/families/skinny_mma.py) on one H200, in one call of ~9 minutes:
#   1. its GPU tests: every variant on its own shapes in both layouts against an fp32 reference, and a
#      sample of every family (this one included) on the edge shapes;
#   2. a tune of the 32 shapes with M <= 16 of benchmarks/skinny_mma/tune_shapes.yaml (the default grid's
#      six, each also TN, the off-grid three, the shape sample's seventeen), the committed library's
#      kernel for each timed beside the shortlist; resumable: a second call goes on where it stopped;
#   3. the committed library (benchmarks/tune + benchmarks/sample_tune) with and without that tune on
#      the 5 held-out shapes with M <= 16 (benchmarks/skinny_mma/heldout.yaml), beside every baseline.
# Raw results and logs in $OUT (tune.tgz: the tune's folder); a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
if [ ! -d results/skinny_mma_tune ]; then
  timeout 120 python3 -m pytest -m gpu -q tests/test_gpu_families.py -k "skinny_mma or edge_shapes" \
    > "$OUT/pytest_gpu_families.log" 2>&1
  echo "families' GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu_families.log"
fi
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
timeout 300 python3 -m hgemm.cli tune --grid benchmarks/skinny_mma/tune_shapes.yaml --out results/skinny_mma_tune \
  --tiles 2 --reps 5 --beside results/committed --max-seconds 240 > "$OUT/tune.log" 2>&1
echo "tune: rc $?"; grep -i "pending" "$OUT/tune.log" | tail -1
tar czf "$OUT/tune.tgz" results/skinny_mma_tune
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune results/skinny_mma_tune \
  --out results/with_skinny_mma > /dev/null || exit 1
timeout 90 python3 -m hgemm.cli bench --library results/committed --library results/with_skinny_mma \
  --grid benchmarks/skinny_mma/heldout.yaml --out "$OUT/heldout.json" > "$OUT/heldout.log" 2>&1
echo "held-out bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout.json" --libraries committed,with_skinny_mma \
  --out "$OUT/heldout_libraries.md" | grep "^| all\|^| class"
grep "^| M <= 16" results/skinny_mma_tune/goals.md
grep "^| b[0-9]*_m" "$OUT/tune.log" | cut -d'|' -f2,3,4,7,8,11

#!/usr/bin/env bash
# The short-K family (kernels_corpus/families/small_k.py) on one H200, in one call of ~6 minutes:
#   1. the families' GPU tests: every short-K variant on its awkward shapes against an fp32 reference,
#      and a sample of every family (short-K included) on the edge shapes;
#   2. a tune of the shape sample's 26 fitting shapes with K <= 16 (benchmarks/small_k/tune_shapes.yaml),
#      the committed library's kernel for each timed beside the shortlist;
#   3. the committed library (benchmarks/tune + benchmarks/sample_tune) with and without that tune on
#      the 15 held-out shapes with K <= 16 (benchmarks/small_k/heldout.yaml), beside every baseline.
# Raw results and logs in $OUT (tune.tgz: the tune's folder); a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 170 python3 -m pytest -m gpu -q tests/test_gpu_families.py > "$OUT/pytest_gpu_families.log" 2>&1
echo "families' GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu_families.log"
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
timeout 240 python3 -m hgemm.cli tune --grid benchmarks/small_k/tune_shapes.yaml --out results/small_k_tune --tiles 2 \
  --reps 5 --beside results/committed > "$OUT/tune.log" 2>&1
echo "tune: rc $?"
tar czf "$OUT/tune.tgz" results/small_k_tune
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune results/small_k_tune --out results/with_small_k > /dev/null || exit 1
timeout 150 python3 -m hgemm.cli bench --library results/committed --library results/with_small_k \
  --grid benchmarks/small_k/heldout.yaml --out "$OUT/heldout.json" > "$OUT/heldout.log" 2>&1
echo "held-out bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout.json" --libraries committed,with_small_k \
  --out "$OUT/heldout_libraries.md" | grep "^| all\|^| class"
grep "^| b[0-9]*_m" "$OUT/tune.log" | cut -d'|' -f2,3,4,7,8,11

#!/usr/bin/env bash
# The tensor-core short-K family (kernels_corpus/families/small_k_mma.py) on one H200, in one call of ~9 minutes:
#   1. its GPU tests: every variant on its own shapes in both layouts against an fp32 reference, and a
#      sample of every family (this one included) on the edge shapes;
#   2. a tune of the 60 shapes with 16 < K <= 64 of benchmarks/small_k_mma/tune_shapes.yaml (the default
#      grid's four, the shape sample's fifty-four, 8192 x 1024 x 64 in both layouts), the committed
#      library's kernel for each timed beside the shortlist; resumable: a second call goes on where it stopped;
#   3. the committed library (benchmarks/tune + benchmarks/sample_tune) with and without that tune on
#      the 23 held-out shapes with 16 < K <= 64 (benchmarks/small_k_mma/heldout.yaml), beside every baseline.
# Raw results and logs in $OUT (tune.tgz: the tune's folder); a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
if [ ! -d results/small_k_mma_tune ]; then
  timeout 120 python3 -m pytest -m gpu -q tests/test_gpu_families.py -k "small_k_mma or edge_shapes" \
    > "$OUT/pytest_gpu_families.log" 2>&1
  echo "families' GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu_families.log"
fi
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
timeout 270 python3 -m hgemm.cli tune --grid benchmarks/small_k_mma/tune_shapes.yaml --out results/small_k_mma_tune \
  --tiles 2 --reps 5 --beside results/committed --max-seconds 200 > "$OUT/tune.log" 2>&1
echo "tune: rc $?"; grep -i "pending" "$OUT/tune.log" | tail -1
tar czf "$OUT/tune.tgz" results/small_k_mma_tune
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune results/small_k_mma_tune \
  --out results/with_small_k_mma > /dev/null || exit 1
timeout 120 python3 -m hgemm.cli bench --library results/committed --library results/with_small_k_mma \
  --grid benchmarks/small_k_mma/heldout.yaml --out "$OUT/heldout.json" > "$OUT/heldout.log" 2>&1
echo "held-out bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout.json" --libraries committed,with_small_k_mma \
  --out "$OUT/heldout_libraries.md" | grep "^| all\|^| class"
grep "^| b[0-9]*_m" "$OUT/tune.log" | cut -d'|' -f2,3,4,7,8,11

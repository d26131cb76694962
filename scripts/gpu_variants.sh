#!/usr/bin/env bash
# An experiment's kernels against each other on one GPU: `bash scripts/gpu_variants.sh FOLDER TESTS [MARKER]`
# for benchmarks/FOLDER/, which holds make_kernels.py (writes the kernels), shapes.yaml and table.py (the
# bench as a table; with MARKER, benchmarks/variant_pairs.py's pairs without and with it instead). First the GPU tests of tests/test_gpu_families.py matching TESTS (pytest -k), then
# the kernels verified on fresh random inputs and timed on the shapes beside every baseline. Raw results
# and logs in $OUT (FOLDER.json, FOLDER.log, pytest_gpu.log); the table last.
#   bash scripts/gpu_variants.sh multicast sharing_either_operand
#   bash scripts/gpu_variants.sh deep_ring past_six
#   bash scripts/gpu_variants.sh two_ctas two_ctas _x2
folder=${1:?usage: bash scripts/gpu_variants.sh FOLDER TESTS [MARKER]}
tests=${2:?usage: bash scripts/gpu_variants.sh FOLDER TESTS [MARKER]}
marker=${3:-}
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
timeout 240 python3 -m pytest -q -m gpu tests/test_gpu_families.py -k "$tests" > "$OUT/pytest_gpu.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/pytest_gpu.log")"
python3 "benchmarks/$folder/make_kernels.py" "results/$folder/kernels" > /dev/null || exit 1
timeout "${BENCH_SECONDS:-300}" python3 -m hgemm.cli bench --kernels "results/$folder/kernels" \
  --grid "benchmarks/$folder/shapes.yaml" --reps 5 --out "$OUT/$folder.json" > "$OUT/$folder.log" 2>&1
echo "bench: rc $?"
if [ -n "$marker" ]; then python3 benchmarks/variant_pairs.py "$OUT/$folder.json" "$marker"
else python3 "benchmarks/$folder/table.py" "$OUT/$folder.json"; fi

#!/usr/bin/env bash
# The harness on the GPU, one mode a call (each well inside 10 minutes):
#   bash scripts/gpu_harness.sh tests   # every GPU test; harness throughput; with OVERHEAD=1 also what
#                                       # the timing guards cost honest kernels
#   bash scripts/gpu_harness.sh grid    # the library over the default grid in both timing regimes,
#                                       # with clocks and throttle reasons per contender
#   bash scripts/gpu_harness.sh retune [GRID]  # the families (header renders) tuned over a grid (the
#                                       # default grid), each shape's winner timed beside benchmarks/tune's
#                                       # kernel in one run
#   bash scripts/gpu_harness.sh sample  # the families tuned over the fitting part of the shape sample (in
#                                       # parts, beside benchmarks/tune); merged with benchmarks/tune, both
#                                       # libraries side by side on the held-out part (BENCH=0: tune only)
#   bash scripts/gpu_harness.sh bench GRID  # a library's choice per shape over a grid, beside every baseline
#                                       # (LIB=folder, default benchmarks/tune; TORCH_COMPILE=1 adds
#                                       # torch.compile max-autotune: 10 shapes took 170 s)
# Raw results (JSON with the environment) and logs go to $OUT; a short table is printed last.
# TESTS="tests/test_gpu_harness.py ..." runs fewer GPU test files; THROUGHPUT=0 leaves out the throughput run.
source scripts/gpu_env.sh
set -o pipefail
mode=${1:-tests}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
case "$mode" in
tests)
  # every test marked gpu (the gpu files, and the GPU checks in test_headers.py and test_params.py)
  tests=${TESTS:-tests}
  # shellcheck disable=SC2086
  timeout 400 python3 -m pytest -m gpu -q -p no:cacheprovider $tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
  [ "${THROUGHPUT:-1}" = 1 ] && timeout 100 python3 benchmarks/harness_throughput.py --candidates 48 --source families \
    --out "$OUT/harness_throughput_families.json" 2>&1 | tail -8
  # OVERHEAD=1: also what the timing guards cost honest kernels (~2 minutes)
  if [ "${OVERHEAD:-0}" = 1 ]; then
    timeout 120 python3 benchmarks/integrity_overhead.py --out "$OUT/integrity_overhead.json" 2>&1 | tail -40
  fi
  ;;
grid)
  # spin_batch took 103 s over the 59 shapes; sustained holds six contenders x 200 ms a shape
  for method in spin_batch sustained; do
    limit=$([ "$method" = sustained ] && echo 280 || echo 150)
    timeout "$limit" python3 -m hgemm.cli bench --library benchmarks/tune --grid configs/grids/default.yaml \
      --timing "$method" --out "$OUT/default_$method.json" > "$OUT/default_$method.log" 2>&1
    echo "$method: rc $?"
  done
  python3 benchmarks/timing_regimes.py "$OUT/default_spin_batch.json" "$OUT/default_sustained.json" \
    --out "$OUT/timing_regimes.md"
  ;;
retune)
  # in parts: each shape's result stays in results/retune*/progress; a later call carrying that folder
  # goes on from there. What comes back: $OUT/retune*.tgz (the table, kernels, bench.json, progress)
  grid=${2:-configs/grids/default.yaml}
  out=results/retune${2:+_$(basename "$grid" .yaml)}
  timeout "${TUNE_LIMIT:-540}" python3 -m hgemm.cli tune --grid "$grid" --out "$out" --tiles "${TILES:-2}" \
    --beside benchmarks/tune --max-seconds "${TUNE_SECONDS:-420}" > "$OUT/$(basename "$out").log" 2>&1
  echo "retune: rc $?"
  tar czf "$OUT/$(basename "$out").tgz" "$out"
  tail -3 "$out/beside.md"
  ;;
sample)
  # goes on from benchmarks/sample_tune's saved results where the settings still match (and resumable
  # like retune: carry results/sample_tune). Then the tuned shapes merged with benchmarks/tune
  # and both libraries timed side by side on the held-out part, in two calls of bench so that a slow part
  # keeps the other's results
  timeout "${TUNE_LIMIT:-420}" python3 -m hgemm.cli tune --grid configs/grids/sample_fit.yaml --out results/sample_tune \
    --tiles 1 --beside benchmarks/tune --resume-from benchmarks/sample_tune --max-seconds "${TUNE_SECONDS:-330}" \
    > "$OUT/sample_tune.log" 2>&1
  echo "sample tune: rc $?"
  tar czf "$OUT/sample_tune.tgz" results/sample_tune
  tail -1 results/sample_tune/beside.md
  [ "${BENCH:-1}" = 1 ] || exit 0
  python3 -m hgemm.cli merge benchmarks/tune results/sample_tune --out results/merged
  for part in "skinny small_k batched" "general large_k"; do
    n=${part%% *}
    # shellcheck disable=SC2086
    timeout 180 python3 -m hgemm.cli bench --library benchmarks/tune --library results/merged \
      --grid configs/grids/sample_heldout.yaml --classes $part --out "$OUT/heldout_$n.json" > "$OUT/heldout_$n.log" 2>&1
    echo "held-out $part: rc $?"
  done
  python3 -m hgemm.cli summarize "$OUT"/heldout_*.json --libraries tune,merged --out "$OUT/heldout.md" | head -8
  ;;
bench)
  grid=${2:?a grid YAML}
  name=$(basename "$grid" .yaml)
  timeout "${LIMIT:-300}" python3 -m hgemm.cli bench --library "${LIB:-benchmarks/tune}" --grid "$grid" \
    $([ "${TORCH_COMPILE:-0}" = 1 ] && echo --torch-compile) --out "$OUT/library_$name.json" > "$OUT/library_$name.log" 2>&1
  echo "bench $name: rc $?"
  tail -4 "$OUT/library_$name.md"
  ;;
esac

#!/usr/bin/env bash
# benchmarks/default_search/'s search and the library with it, on one GPU in one call of about 5 minutes:
# `bash scripts/gpu_default_search.sh`. First the GPU test of the one-consumer tiles' tensor stores
# (tests/test_gpu_families.py), then every configuration of every family on the default grid's slowest
# shapes (scripts/gpu_search_headroom.sh with GRID=benchmarks/default_search/tune_shapes.yaml), that tune
# put where configs/gpu-rl.yaml's tune.reuse names it (benchmarks/default_search/tune), and the library
# with it on the default grid (scripts/gpu_pipeline_library.sh default). Outputs in $OUT/search (tune.log,
# search.tgz: the tune folder to commit as benchmarks/default_search/tune) and $OUT/library
# (benchmarks/pipeline_library/'s files), eight files in all: as many as the device tool returns.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
tests=${TESTS-one_consumer_tiles}   # the GPU tests run first (pytest -k); TESTS= runs none
if [ -n "$tests" ]; then
  timeout 240 python3 -m pytest -q -m gpu tests/test_gpu_families.py -k "$tests" > "$OUT/pytest_gpu.log" 2>&1
  echo "gpu tests: $(tail -1 "$OUT/pytest_gpu.log")"
fi
out=$OUT
OUT=$out/search GRID=benchmarks/default_search/tune_shapes.yaml NAME=default_search bash scripts/gpu_search_headroom.sh
rm -rf benchmarks/default_search/tune && cp -r results/default_search benchmarks/default_search/tune
OUT=$out/library bash scripts/gpu_pipeline_library.sh default
rm -f "$out/search/gpu.txt" "$out/library/gpu.txt"   # the same as $OUT/gpu.txt

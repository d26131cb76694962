#!/usr/bin/env bash
# How far a per-shape search over the seed families' configurations gets past the library on shapes no
# tune saw, on one GPU: `bash scripts/gpu_search_headroom.sh [TILES]`. GRID (default
# configs/grids/heldout.yaml) and NAME (the tune's folder under results/, default search_headroom) run it
# on other shapes: `GRID=benchmarks/default_search/tune_shapes.yaml NAME=default_search` searches the
# default grid's shapes where the library is furthest behind (benchmarks/default_search/).
#
# rl_hgemm's model writes the families' configurations, so the most its best-of-8 can beat the library
# by is what a search over those configurations finds. On the 48 shapes of configs/grids/heldout.yaml
# (rl_hgemm's held-out grid), a tune times TILES tile shapes a family (default 99: every one that
# applies, each at its two deepest pipelines; the library's own tunes time 2) and, in the same run, the
# pipeline's library's choice (configs/gpu-rl.yaml's tune.reuse, merged). The last line of beside.md
# counts the shapes where the search's winner takes more than 2% off the library's time.
# Resumable: call again on the same machine, or on a fresh one of the same GPU model with the last
# call's folder (tar xzf search.tgz here, then carry results/NAME). Raw results in $OUT.
tiles=${1:-99}
grid=${GRID:-configs/grids/heldout.yaml}
name=${NAME:-search_headroom}
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
merge_pipeline_library || exit 1
timeout 560 python3 -m hgemm.cli tune --grid "$grid" --out "results/$name" \
  --tiles "$tiles" --reps 5 --beside results/pipeline_library --max-seconds 500 > "$OUT/tune.log" 2>&1
echo "tune: rc $?"
tar czf "$OUT/search.tgz" "results/$name"
grep "still to tune" "$OUT/tune.log"
tail -n 3 "results/$name/beside.md"

#!/usr/bin/env bash
# The library's dispatch rules side by side on shapes no tune saw, on one H200 (~275 s):
#   bash scripts/gpu_dispatch.sh
# One library merged from the committed tunes (benchmarks/tune, benchmarks/sample_tune) twice, once
# per rule (`measured`, `cost`: hgemm.library), and both libraries' kernels timed with every baseline
# in one run on each held-out grid: configs/grids/heldout.yaml (the RL held-out shapes) and
# configs/grids/sample_heldout.yaml (the shape sample's held-out split). Raw results in $OUT/<grid>.json,
# the side-by-side table in $OUT/<grid>.md (committed as benchmarks/dispatch/).
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"
LIBS=/tmp/dispatch_libs
rm -rf "$LIBS"
for rule in measured cost; do
  python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out "$LIBS/$rule" --dispatch "$rule" > /dev/null || exit 1
done
for grid in heldout:240 sample_heldout:300; do
  name=${grid%%:*}
  start=$(date +%s)
  timeout "${grid##*:}" python3 -m hgemm.cli bench --library "$LIBS/measured" --library "$LIBS/cost" \
    --grid "configs/grids/$name.yaml" --out "$OUT/$name.json" 2>&1 | grep -v "it/s\]" | tail -1
  echo "$name: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
done
for name in heldout sample_heldout; do
  [ -f "$OUT/$name.md" ] && { echo "== $name"; sed -n '/Libraries side by side/,$p' "$OUT/$name.md" | grep "^|"; }
done

#!/usr/bin/env bash
# Two libraries, each merged from its tune folders, timed side by side with every baseline on the shapes
# no tune saw: the shape sample's held-out split (in two parts, so that a slow part keeps the other's
# results) and the RL held-out grid, one run each (~330 s on one H200 with two libraries). Raw results
# and the side-by-side summaries in $OUT; the libraries are named by the folders they are merged into.
# Usage (GPU machine, repo root):
#   bash scripts/gpu_compare_libraries.sh "benchmarks/tune benchmarks/sample_tune" \
#        "benchmarks/wgmma_64_rows/default_tune benchmarks/wgmma_64_rows/sample_tune" [NAME_A NAME_B]
source scripts/gpu_env.sh
a=${1:?tune folders of the first library}
b=${2:?tune folders of the second library}
name_a=${3:-committed}
name_b=${4:-merged}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
# shellcheck disable=SC2086
python3 -m hgemm.cli merge $a --out "results/$name_a" > /dev/null || exit 1
# shellcheck disable=SC2086
python3 -m hgemm.cli merge $b --out "results/$name_b" > /dev/null || exit 1
libs=(--library "results/$name_a" --library "results/$name_b")
for part in "skinny small_k batched" "general large_k"; do
  n=${part%% *}
  # shellcheck disable=SC2086
  timeout 200 python3 -m hgemm.cli bench "${libs[@]}" --grid configs/grids/sample_heldout.yaml --classes $part \
    --out "$OUT/sample_heldout_$n.json" > "$OUT/sample_heldout_$n.log" 2>&1
  echo "sample held-out, $part: rc $?"
done
timeout 200 python3 -m hgemm.cli bench "${libs[@]}" --grid configs/grids/heldout.yaml --out "$OUT/rl_heldout.json" \
  > "$OUT/rl_heldout.log" 2>&1
echo "RL held-out: rc $?"
python3 -m hgemm.cli summarize "$OUT"/sample_heldout_*.json --libraries "$name_a,$name_b" --out "$OUT/sample_heldout.md" \
  | grep "^| all\|^| TN"
sed -n '/Libraries side by side/,$p' "$OUT/rl_heldout.md" 2>/dev/null | grep "^| all\|^| TN"

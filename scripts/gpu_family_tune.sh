#!/usr/bin/env bash
# A seed family's tune on one H200, in one call of up to ~9 minutes: `bash scripts/gpu_family_tune.sh
# FOLDER [FAMILY]` for a folder benchmarks/FOLDER/ that holds the shapes to tune (tune_shapes.yaml) and
# shapes no tune saw (heldout.yaml), and the family of kernels_corpus/families/ they are for (FAMILY,
# FOLDER by default: skinny_mma, small_k_mma; `skinny_rows skinny_mma` for that family past 16 rows):
#   1. the family's GPU tests (tests/test_gpu_families.py -k FAMILY: every variant on its own shapes in
#      both layouts against an fp32 reference) and a sample of every family on the edge shapes;
#   2. a tune of benchmarks/FOLDER/tune_shapes.yaml, the committed library's kernel for each shape timed
#      beside the shortlist (every variant of the families without an estimate, skinny_mma among them,
#      and TILES tile shapes of the others, default 2); resumable: a second call on the same machine
#      goes on where it stopped, and so does one on a fresh machine given the last call's folder (tar
#      xzf tune.tgz here, then carry results/FOLDER_tune); results saved on another GPU model or under
#      other headers are measured again;
#   3. once the tune is whole, the committed library (benchmarks/tune + benchmarks/sample_tune) with and
#      without that tune on benchmarks/FOLDER/heldout.yaml, beside every baseline.
# Raw results and logs in $OUT (tune.tgz: the tune's folder); a short table last.
folder=${1:?usage: bash scripts/gpu_family_tune.sh FOLDER [FAMILY]}
family=${2:-$folder}
shapes=benchmarks/$folder
[ -f "$shapes/tune_shapes.yaml" ] && [ -f "$shapes/heldout.yaml" ] || { echo "no shape lists in $shapes/"; exit 2; }
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
if [ ! -d "results/${folder}_tune" ]; then
  timeout 230 python3 -m pytest -m gpu -q tests/test_gpu_families.py -k "$family or edge_shapes" \
    > "$OUT/pytest_gpu_families.log" 2>&1
  echo "families' GPU tests: rc $?"; tail -3 "$OUT/pytest_gpu_families.log"
fi
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
timeout 240 python3 -m hgemm.cli tune --grid "$shapes/tune_shapes.yaml" --out "results/${folder}_tune" \
  --tiles "${TILES:-2}" --reps 5 --beside results/committed --max-seconds 180 > "$OUT/tune.log" 2>&1
echo "tune: rc $?"
tar czf "$OUT/tune.tgz" "results/${folder}_tune"
if grep "still to tune" "$OUT/tune.log"; then   # the held-out comparison waits for the whole tune
  grep "^| b[0-9]*_m" "$OUT/tune.log" | cut -d'|' -f2,3,4,7,8,11
  exit 0
fi
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune "results/${folder}_tune" \
  --out "results/with_$folder" > /dev/null || exit 1
timeout 120 python3 -m hgemm.cli bench --library results/committed --library "results/with_$folder" \
  --grid "$shapes/heldout.yaml" --out "$OUT/heldout.json" > "$OUT/heldout.log" 2>&1
echo "held-out bench: rc $?"
python3 -m hgemm.cli summarize "$OUT/heldout.json" --libraries "committed,with_$folder" \
  --out "$OUT/heldout_libraries.md" | grep "^| all\|^| class"
sed -n "/^| class/,/^$/p" "results/${folder}_tune/goals.md"
grep "^| b[0-9]*_m" "$OUT/tune.log" | cut -d'|' -f2,3,4,7,8,11

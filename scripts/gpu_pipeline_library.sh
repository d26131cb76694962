#!/usr/bin/env bash
# The pipeline's library (configs/gpu-rl.yaml's tune.reuse, merged) where the bars are set, on one
# GPU in two calls of under 3 minutes: `bash scripts/gpu_pipeline_library.sh default` then `... odd`.
#   default: the default grid (59 tuned shapes), the library beside benchmarks/tune alone, every baseline
#            in the same run (benchmarks/pipeline_library/);
#   odd:     the ten odd shapes of benchmarks/torch_compile/ (the shape sample's held-out split), the library
#            and its first-call search's picks (`hgemm pin --autotune 8`) beside every baseline,
#            torch.compile max-autotune among them (benchmarks/torch_compile/).
# Raw results and logs in $OUT; the libraries side by side last.
what=${1:?usage: bash scripts/gpu_pipeline_library.sh default|odd}
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
merge_pipeline_library || exit 1
if [ "$what" = default ]; then
  timeout 400 python3 -m hgemm.cli bench --library benchmarks/tune --library results/pipeline_library \
    --grid configs/grids/default.yaml --reps 5 --out "$OUT/default.json" > "$OUT/default.log" 2>&1
  echo "bench rc $?"
  python3 -m hgemm.cli summarize "$OUT/default.json" --libraries tune,pipeline_library \
    --out "$OUT/default_libraries.md" | grep "^| all\|^| class"
  exit 0
fi
for g in odd_nn odd_tn_large_k; do
  timeout 60 python3 -m hgemm.cli pin results/pipeline_library --grid "benchmarks/torch_compile/$g.yaml" \
    --autotune 8 --out "results/at_$g" > "$OUT/pin_$g.log" 2>&1
  echo "pin $g rc $?"
  timeout 150 python3 -m hgemm.cli bench --library results/pipeline_library --library "results/at_$g" \
    --grid "benchmarks/torch_compile/$g.yaml" --torch-compile --out "$OUT/$g.json" > "$OUT/$g.log" 2>&1
  echo "bench $g rc $?"
done
for g in odd_nn odd_tn_large_k; do
  python3 -m hgemm.cli summarize "$OUT/$g.json" --libraries "pipeline_library,at_$g" \
    --out "$OUT/${g}_libraries.md" | grep "^| all"
done

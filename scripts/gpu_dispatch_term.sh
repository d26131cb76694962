#!/usr/bin/env bash
# The cost rule with and without its misaligned-loads term, on the held-out shapes where the term
# changes the kernel (benchmarks/dispatch/misaligned_term.yaml), on one H200 (~100 s):
#   git worktree add /tmp/without_term 4a2f6bb      # hgemm/cost.py without the term
#   (cd /tmp/without_term && python -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out /tmp/merged \
#      && python -m hgemm.cli pin /tmp/merged --grid benchmarks/dispatch/misaligned_term.yaml --out "$OLDPWD/results/without_term")
#   device: bash scripts/gpu_dispatch_term.sh, carrying results/without_term
# Both libraries' kernels timed with every baseline in one run; raw results in $OUT/misaligned_term.json.
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out /tmp/with_term > /dev/null || exit 1
start=$(date +%s)
timeout "${BENCH_SECONDS:-240}" python3 -m hgemm.cli bench --library results/without_term --library /tmp/with_term \
  --grid benchmarks/dispatch/misaligned_term.yaml --out "$OUT/misaligned_term.json" 2>&1 | grep -v "it/s\]" | tail -1
echo "bench: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
[ -f "$OUT/misaligned_term.md" ] && sed -n '/Libraries side by side/,$p' "$OUT/misaligned_term.md" | grep "^|"

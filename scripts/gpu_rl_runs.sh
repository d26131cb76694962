#!/usr/bin/env bash
# Four device calls on one warm nvidia-h200 (issue each within the machine's idle window, so
# results/gpu-rl and work/gpu-rl from the one before are still there): configs/gpu-rl.yaml.
# Session 6 measured (benchmarks/rl_runs/session6/): corpus + tokenizer + pretrain + rl_general no
# longer fit one call, so rl_general has a call of its own.
#   bash scripts/gpu_rl_runs.sh 1    corpus, tokenizer, pretrain, tune (~330 s)
#   bash scripts/gpu_rl_runs.sh 2    rl_general (~280 s)
#   bash scripts/gpu_rl_runs.sh 3    rl_hgemm (~430 s: 280 s of training, four probes after it)
#   bash scripts/gpu_rl_runs.sh 4    sample, bench, report (~110 s)
#   bash scripts/gpu_rl_runs.sh pretrain   corpus, tokenizer, pretrain only (does the model write the format?)
# Each call writes $OUT/snakemake_<phase>.log and packs results/gpu-rl (no weights) into $OUT/rl_<phase>.tgz.
source scripts/gpu_env.sh
PHASE=${1:?phase 1, 2, 3, 4 or pretrain}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
case "$PHASE" in 1) target="pretrain tune" ;; 2) target=rl_general ;; 3) target=rl_hgemm ;; 4) target=all ;; *) target=$PHASE ;; esac
start=$(date +%s)
timeout 570 snakemake $target --cores all --keep-going --configfile configs/gpu-rl.yaml > "$OUT/snakemake_$PHASE.log" 2>&1
echo "snakemake ($target) exit $? after $(( $(date +%s) - start )) s"
grep -E "Finished jobid|Error in rule|steps \(" "$OUT/snakemake_$PHASE.log" | tail -12
cat results/gpu-rl/benchmarks/*.tsv 2>/dev/null | grep -v "^s" | cut -f1 | paste -sd' '
find results/gpu-rl -type f \( -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.html" -o -name "*.png" \
  -o -name "*.log" -o -name "*.tsv" -o -name "*.sqlite" -o -name "*.cu" -o -name "*.yaml" \) -size -20M \
  ! -name "tokenizer.json" | tar czf "$OUT/rl_$PHASE.tgz" -T -

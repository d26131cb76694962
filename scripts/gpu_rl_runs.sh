#!/usr/bin/env bash
# configs/gpu-rl.yaml in three runs on one H200, each under 10 minutes, one after the other on the same
# machine (results/gpu-rl and work/gpu-rl from the one before must still be there); results in
# benchmarks/rl_runs/.
#   bash scripts/gpu_rl_runs.sh 1    corpus, tokenizer, pretrain, tune (copied), rl_general (120 s of training)
#   bash scripts/gpu_rl_runs.sh 2    rl_hgemm (330 s of training with the held-out curve, then both models probed)
#   bash scripts/gpu_rl_runs.sh 3    sample (both models), bench, library, report
#   bash scripts/gpu_rl_runs.sh pretrain   corpus, tokenizer, pretrain only (does the model write the format?)
# Each run writes $OUT/snakemake_<phase>.log and packs results/gpu-rl (no weights) into $OUT/rl_<phase>.tgz.
# Phases 2 and 3 need the weights phase 1 left in results/gpu-rl and work/gpu-rl on the same host (the
# packed files hold none): on a fresh host they pretrain again and do not fit their calls.
source scripts/gpu_env.sh
PHASE=${1:?phase 1, 2, 3 or pretrain}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
case "$PHASE" in 1) target="rl_general tune" ;; 2) target=rl_hgemm ;; 3) target=all ;; *) target=$PHASE ;; esac
start=$(date +%s)
# snakemake can take over 30 s to stop a training job: ask at 545 s and kill 15 s later, so that the
# packing below always runs inside 10 minutes.
timeout -k 15 545 snakemake $target --cores all --keep-going --configfile configs/gpu-rl.yaml > "$OUT/snakemake_$PHASE.log" 2>&1
echo "snakemake ($target) exit $? after $(( $(date +%s) - start )) s"
grep -E "Finished jobid|Error in rule|steps \(" "$OUT/snakemake_$PHASE.log" | tail -12
cat results/gpu-rl/benchmarks/*.tsv 2>/dev/null | grep -v "^s" | cut -f1 | paste -sd' '
find results/gpu-rl -type f \( -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.html" -o -name "*.png" \
  -o -name "*.log" -o -name "*.tsv" -o -name "*.sqlite" -o -name "*.cu" -o -name "*.yaml" \) -size -20M \
  ! -name "tokenizer.json" > /tmp/rl_files.txt
# a stage stopped before its end leaves its progress in work/: the kernel database (with its WAL, which
# holds the rows not yet checkpointed into the main file) and the trainer state of its last checkpoint
find work/gpu-rl -type f \( -name "kernels.sqlite*" -o -name "trainer_state.json" \) -size -20M >> /tmp/rl_files.txt
tar czf "$OUT/rl_$PHASE.tgz" -T /tmp/rl_files.txt

#!/usr/bin/env bash
# One device call (nvidia-h200): the default pretraining run (training capped at 6 minutes), then its
# results copied to $OUT. The corpus and tokenizer are built on the CPU machine first and carried,
# since the GPU image lacks nvidia-cutlass:
#   here:  python -m stages.corpus --config configs/sections/corpus.yaml --out results/corpus
#          python -m stages.tokenizer --config configs/sections/tokenizer.yaml --corpus results/corpus --out results/tokenizer
#   run:   carry [".whl", "results/corpus", "results/tokenizer"], command: bash scripts/gpu_pretrain.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 540 python3 -m stages.pretrain --config configs/sections/pretrain.yaml --corpus results/corpus \
  --tokenizer results/tokenizer --work /tmp/work/pretrain --out /tmp/pretrain > "$OUT/pretrain.log" 2>&1
echo "pretrain exit $?"; grep -v "it/s\]" "$OUT/pretrain.log" | tail -12
cp /tmp/pretrain/{metrics.json,loss_curve.json,samples.jsonl} "$OUT/" 2>/dev/null

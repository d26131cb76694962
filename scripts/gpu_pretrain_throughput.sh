#!/usr/bin/env bash
# One device call (nvidia-h200): tokens/s and MFU of the configured pretraining setup against the same
# model under plain HF Trainer defaults. Carry [".whl", "results/corpus", "results/tokenizer"] as for
# scripts/gpu_pretrain.sh. Writes $OUT/pretrain_throughput.json.
source scripts/gpu_env.sh
timeout 540 python3 -m benchmarks.pretrain_throughput --config configs/sections/pretrain.yaml \
  --tokenizer results/tokenizer --corpus results/corpus 2>&1 | grep -v "it/s\]" | tail -15

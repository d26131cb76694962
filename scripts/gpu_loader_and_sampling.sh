#!/usr/bin/env bash
# One device call (nvidia-h200) for two short measurements, sharing a machine start:
#   1. scripts/gpu_misaligned_loaders.sh: the wgmma ldg loader and mma.sync pair-load variants (issue 3), ~150 s;
#   2. benchmarks.generation_speed: sampling settings for the RL stages (issues 6 and 7), ~120 s. An RL
#      step is ~70% sampling at 14 ms a token step (eager attention, dynamic cache); the candidates are
#      a static cache with eager attention, and transformers' continuous batching (generate_batch),
#      which TRL's GRPO can use.
# Usage (GPU machine, repo root): bash scripts/gpu_loader_and_sampling.sh
source scripts/gpu_env.sh
bash scripts/gpu_misaligned_loaders.sh
timeout 240 python3 -m benchmarks.generation_speed --out "$OUT/generation_speed.json" 2>&1 | tail -7

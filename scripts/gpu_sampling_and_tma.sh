#!/usr/bin/env bash
# One device call (nvidia-h200, ~300 s), after the three RL calls of scripts/gpu_rl_runs.sh:
#   1. sampling speed at RL lengths (issues 6, 7): static cache against the dynamic one with eager
#      attention, fp32 (the GRPO policy's weights) and bf16 (the sampling stages), 2048-token prompts and
#      1024 new tokens. Session 5 measured 3.6x for bf16 at 400 + 256 tokens; a static cache attends over
#      its whole length at every step, so the gain may shrink at RL lengths. If it holds, set
#      `grpo.cache_implementation: static` (both RL stages) and `sample.cache_implementation: static`.
#   2. the TMA flat probe (issue 3): does the H200 enforce the PTX rule that a TMA box starts 16-byte
#      aligned (PTX ISA 5.5.3.1)? Each case runs in its own process; see benchmarks/tma_flat/README.md.
# Usage (GPU machine, repo root): bash scripts/gpu_sampling_and_tma.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m benchmarks.generation_speed --prompt 2048 --new 1024 --only eager --no-profile \
  --out "$OUT/generation_speed_rl_lengths.json" 2>&1 | grep -v "Loading weights" | tail -5
timeout 240 python3 -m benchmarks.tma_flat_probe --out "$OUT/tma_flat_probe.json" 2>&1 | tail -25

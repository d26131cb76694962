#!/usr/bin/env bash
# One device call (nvidia-h200, ~420 s): pretrain on the corpus with in-context framings
# (kernels_corpus/harvest.py, context_framings), then ask the new model the RL stages' prompts with and
# without a kernel in them (benchmarks/in_context_probe.py). Session 5's model, pretrained without those
# framings, parsed 0 of 32 rl_general probe completions with the seed solution shown, and rl_hgemm's
# parse rate fell from 0.8 to 0-0.09 from the first step whose prompts held a kernel.
# Usage (GPU machine, repo root): bash scripts/gpu_in_context.sh
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
timeout 330 snakemake pretrain --cores all --configfile configs/gpu-rl.yaml > "$OUT/snakemake_pretrain.log" 2>&1
echo "snakemake pretrain exit $? after $(( $(date +%s) - start )) s"
mkdir -p "$OUT/pretrain" "$OUT/corpus"
cp results/gpu-rl/pretrain/{metrics.json,loss_curve.json,samples.jsonl} "$OUT/pretrain/" 2>/dev/null
cp results/gpu-rl/corpus/{stats.json,stats.md,metrics.json} "$OUT/corpus/" 2>/dev/null
cp -r results/gpu-rl/logs "$OUT/" 2>/dev/null
timeout 150 python3 -m benchmarks.in_context_probe --model results/gpu-rl/pretrain \
  --rl-general-config results/gpu-rl/.config/rl_general.yaml --rl-hgemm-config results/gpu-rl/.config/rl_hgemm.yaml \
  --out "$OUT/in_context_probe.json" 2>&1 | grep -v "Loading weights" | tail -8
python3 -c "import json; m = json.load(open('$OUT/pretrain/metrics.json')); print({k: m[k] for k in ('eval_loss', 'parse_rate', 'pass_rate')})"

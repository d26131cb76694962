#!/usr/bin/env bash
# One device call (nvidia-h200-x2), everything pretraining needs measured:
#   GPU 0: the default pretraining run (training capped at TRAIN_S seconds), then 48 samples parsed,
#          compiled and verified by the harness;
#   GPU 1, meanwhile: tokens/s and MFU of the configured setup against plain HF Trainer defaults;
#   then both GPUs: the same run under DeepSpeed ZeRO-2 (half the per-device batch, so the global batch
#          and the LR schedule match), to compare loss curves step by step with the one-GPU run.
# The corpus and tokenizer are built here first and carried (the GPU image lacks nvidia-cutlass):
#   python -m stages.corpus --config configs/sections/corpus.yaml --out results/corpus
#   python -m stages.tokenizer --config configs/sections/tokenizer.yaml --corpus results/corpus --out results/tokenizer
#   carry [".whl", "results/corpus", "results/tokenizer"]; command: bash scripts/gpu_pretrain_x2.sh [TRAIN_S]
source scripts/gpu_env.sh
export TORCH_CUDA_ARCH_LIST=9.0   # the image's "9.0a" is not parseable by DeepSpeed's op builder
TRAIN_S=${1:-180}
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
data=(--config configs/sections/pretrain.yaml --corpus results/corpus --tokenizer results/tokenizer)
CUDA_VISIBLE_DEVICES=1 OUT="$OUT" timeout 280 python3 -m benchmarks.pretrain_throughput \
  --config configs/sections/pretrain.yaml --tokenizer results/tokenizer --corpus results/corpus \
  > "$OUT/pretrain_throughput.log" 2>&1 &
CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m stages.pretrain "${data[@]}" --set train.max_train_seconds="$TRAIN_S" \
  --work /tmp/w1 --out /tmp/one_gpu > "$OUT/one_gpu.log" 2>&1
echo "1 GPU exit $?"
wait
timeout 280 torchrun --standalone --nproc_per_node=2 -m stages.pretrain "${data[@]}" --set train.max_train_seconds="$TRAIN_S" \
  --set sample.num_samples=0 --set train.per_device_train_batch_size=2 --deepspeed configs/deepspeed/zero2.json \
  --work /tmp/w2 --out /tmp/two_gpu > "$OUT/zero2.log" 2>&1
echo "ZeRO-2 exit $?"
mkdir -p "$OUT/one_gpu" "$OUT/zero2"
cp /tmp/one_gpu/{metrics.json,loss_curve.json,samples.jsonl} "$OUT/one_gpu/" 2>/dev/null
cp /tmp/two_gpu/{metrics.json,loss_curve.json} "$OUT/zero2/" 2>/dev/null
cp -r /tmp/w1/tensorboard "$OUT/one_gpu/tensorboard" 2>/dev/null
grep -v "it/s\]" "$OUT/one_gpu.log" | tail -14; tail -14 "$OUT/pretrain_throughput.log"; grep -v "it/s\]" "$OUT/zero2.log" | tail -6

#!/usr/bin/env bash
# One device call (nvidia-h200-x2): the same short pretraining run on one GPU and with DeepSpeed ZeRO-2
# on two (half the per-device batch, so the global batch matches), for comparing loss curves.
# Carry [".whl", "results/corpus", "results/tokenizer"]. The image's TORCH_CUDA_ARCH_LIST=9.0a is not
# parseable by DeepSpeed's op builder: 9.0 compiles the same code.
source scripts/gpu_env.sh
export TORCH_CUDA_ARCH_LIST=9.0
STEPS=${1:-300}
common=(--config configs/sections/pretrain.yaml --corpus results/corpus --tokenizer results/tokenizer
        --set train.max_steps="$STEPS" --set train.max_train_seconds=200 --set sample.num_samples=0)
CUDA_VISIBLE_DEVICES=0 timeout 260 python3 -m stages.pretrain "${common[@]}" --work /tmp/w1 --out /tmp/one_gpu \
  > "$OUT/one_gpu.log" 2>&1; echo "1 GPU exit $?"
timeout 300 torchrun --standalone --nproc_per_node=2 -m stages.pretrain "${common[@]}" --work /tmp/w2 --out /tmp/two_gpu \
  --deepspeed configs/deepspeed/zero2.json --set train.per_device_train_batch_size=4 > "$OUT/zero2.log" 2>&1
echo "ZeRO-2 exit $?"
cp /tmp/one_gpu/loss_curve.json "$OUT/loss_one_gpu.json"; cp /tmp/two_gpu/loss_curve.json "$OUT/loss_zero2.json"
cp /tmp/one_gpu/metrics.json "$OUT/metrics_one_gpu.json"; cp /tmp/two_gpu/metrics.json "$OUT/metrics_zero2.json"
tail -5 "$OUT/zero2.log"

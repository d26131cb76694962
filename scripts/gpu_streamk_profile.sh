#!/usr/bin/env bash
# Where stream-K's time goes, in one call of about three minutes: `bash scripts/gpu_streamk_profile.sh`
#   1. benchmarks/streamk/profile.py: stream-K variants beside their twins, L2 warm and cold, at the
#      spec's grid and smaller ones;
#   2. the kernels of the shapes in $NCU (indices into the list below, default "0 1") under Nsight
#      Compute: DRAM and L2 traffic, stall reasons.
# Raw results and logs in $OUT. PAIRS="SHAPE@KERNEL ..." profiles those instead, every one under Nsight
# Compute: any seed-family kernel (a stream-K one beside its whole-tile twin), or `torch` for the kernels
# torch.matmul (cuBLAS) runs on the shape.
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
pairs=(
  4096x4096x14336@wgmma_128x256x64_c2_s3_g8_stk8_es
  2048x2048x2048@wgmma_128x256x64_c2_s3_g8_stk8_es
  4096x4096x4096@wgmma_128x192x64_c2_s4_g8_stk8_es
  512x512x512x16@wgmma_128x128x64_c1_s5_g8_stk8_es
  128x512x7616@wgmma_64x64x64_c1_s6_g8_stk8_es
  2455x3840x7680@wgmma_128x192x64_c2_s4_g8_stk8_es
)
profiled=()
for i in ${NCU:-0 1}; do profiled+=("${pairs[$i]}"); done
grids=131,120,66
if [ -n "${PAIRS:-}" ]; then read -r -a pairs <<< "$PAIRS"; profiled=("${pairs[@]}"); grids=; fi
timeout 200 python3 benchmarks/streamk/profile.py "${pairs[@]}" --grids "$grids" \
  --out "$OUT/streamk_profile.json" 2>&1 | tee "$OUT/streamk_profile.log"
timeout 200 ncu --clock-control none --profile-from-start off \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum \
  python3 benchmarks/streamk/profile.py "${profiled[@]}" --ncu > "$OUT/ncu.txt" 2>&1
echo "ncu: rc $?"
grep -E ", Context |Duration|dram__bytes|lts__t_sector_hit|lts__t_bytes|Memory Throughput|DRAM Throughput|Stall|Warp Cycles Per Issued" "$OUT/ncu.txt" | head -80

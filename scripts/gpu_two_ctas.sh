#!/usr/bin/env bash
# Two CTAs an SM against one, on one GPU: `bash scripts/gpu_two_ctas.sh` (benchmarks/two_ctas/). The
# one-consumer wgmma tiles whose shared memory lets two CTAs share an SM, each as the family renders it
# (a persistent grid of one CTA an SM) and with a grid of two (`_x2`), timed on benchmarks/two_ctas/shapes.yaml
# beside the default grid's search's one-CTA picks and every baseline, every kernel verified on fresh random
# inputs, after the GPU tests of every such variant. Raw results in $OUT; the pairs last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
python3 -m pytest -q -m gpu tests/test_gpu_families.py -k two_ctas > "$OUT/pytest_two_ctas_edge.log" 2>&1
echo "gpu tests: $(tail -1 "$OUT/pytest_two_ctas_edge.log")"
python3 benchmarks/two_ctas/make_kernels.py results/two_ctas/kernels > /dev/null || exit 1
timeout 240 python3 -m hgemm.cli bench --kernels results/two_ctas/kernels --grid benchmarks/two_ctas/shapes.yaml \
  --reps 5 --out "$OUT/two_ctas.json" > "$OUT/two_ctas.log" 2>&1
echo "bench: rc $?"
python3 benchmarks/variant_pairs.py "$OUT/two_ctas.json" _x2

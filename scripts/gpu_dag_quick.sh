#!/usr/bin/env bash
# One device call: the whole DAG with configs/gpu-quick.yaml on one H200, then the outputs worth
# keeping (metrics, curves, logs, report, bench, tune table, held-out list, kernel DBs; no weights)
# packed into $OUT/dag.tgz. Usage (GPU machine, repo root): bash scripts/gpu_dag_quick.sh [SECONDS]
source scripts/gpu_env.sh
LIMIT=${1:-570}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
timeout "$LIMIT" snakemake --cores all --keep-going --configfile configs/gpu-quick.yaml > "$OUT/snakemake.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - start )) s"
tail -25 "$OUT/snakemake.log"
find results -type f \( -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.html" -o -name "*.png" \
  -o -name "*.log" -o -name "*.tsv" -o -name "*.sqlite" -o -name "*.cu" -o -name "*.yaml" \) -size -20M \
  | tar czf "$OUT/dag.tgz" -T -
ls -la "$OUT"

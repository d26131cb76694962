#!/usr/bin/env bash
# The gpu-quick DAG on one H200, in one call of under 10 minutes:
#   bash scripts/gpu_dag_quick.sh              # the whole DAG with configs/gpu-quick.yaml as it is
#   bash scripts/gpu_dag_quick.sh default-rl   # the DAG with shorter training caps (pretrain 90 s,
#       rl_general 35 s, rl_hgemm 45 s), then rl_general and rl_hgemm at configs/default.yaml's sizes
#       (32 completions a step of up to 768 + 1024 and 2304 + 2304 tokens) for one optimiser step each,
#       from the DAG's models, no probe: whether the default RL settings fit the GPU (gradient
#       checkpointing, sdpa training, eager sampling).
# Copies logs, metrics, curves, the report and Snakemake's per-stage benchmark TSVs to $OUT (all of
# results/ but weights also packed into $OUT/dag.tgz) and prints a table: seconds, steps, peak GPU memory,
# and the share of the last step's completions cut at max_completion_length (full-length sequences).
# Usage (GPU machine, repo root): bash scripts/gpu_dag_quick.sh [default-rl]
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$OUT/gpu.txt"
call_start=$(date +%s)
# from scratch: results/ and work/ from an earlier run would make snakemake skip stages
rm -rf results work .snakemake

mode=${1:-dag}
DEFAULT=/tmp/default_rl
rm -rf "$DEFAULT"

# 1. the gpu-quick DAG; for default-rl with a file of shorter caps laid over it (nested keys merge)
configs=(configs/gpu-quick.yaml)
limit=560
if [ "$mode" = default-rl ]; then
  printf '%s\n' "pretrain: {train: {max_train_seconds: 90}}" "rl_general: {grpo: {max_train_seconds: 35}}" \
    "rl_hgemm: {grpo: {max_train_seconds: 45}}" > /tmp/dag_quick_caps.yaml
  configs+=(/tmp/dag_quick_caps.yaml)
  limit=390
fi
start=$(date +%s)
timeout -k 15 "$limit" snakemake --cores all --keep-going --configfile "${configs[@]}" > "$OUT/snakemake.log" 2>&1
echo "gpu-quick DAG: snakemake exit $? after $(( $(date +%s) - start )) s"
grep -E "Finished jobid|Error in rule|out of memory" "$OUT/snakemake.log" | tail -14

# 2. the default config's RL stages, one step each (the second from the first's model when it finished)
if [ "$mode" = default-rl ]; then
mkdir -p "$DEFAULT"
one_step=(--set grpo.max_steps=1 --set grpo.save_steps=1 --set probe.prompts=0)
start=$(date +%s)
timeout -k 10 55 python -m stages.rl_general --config configs/default.yaml --model results/pretrain \
  --work "$DEFAULT/work/rl_general" --out "$DEFAULT/rl_general" "${one_step[@]}" > "$DEFAULT/rl_general.log" 2>&1
echo "default rl_general: exit $? after $(( $(date +%s) - start )) s"
model=$DEFAULT/rl_general; [ -f "$model/metrics.json" ] || model=results/pretrain
start=$(date +%s)
timeout -k 10 85 python -m stages.rl_hgemm --config configs/default.yaml --model "$model" --library results/tune \
  --work "$DEFAULT/work/rl_hgemm" --out "$DEFAULT/rl_hgemm" "${one_step[@]}" > "$DEFAULT/rl_hgemm.log" 2>&1
echo "default rl_hgemm: exit $? after $(( $(date +%s) - start )) s"
fi

# what comes back: small files as they are, everything but weights in dag.tgz
find results $([ -d "$DEFAULT" ] && echo "$DEFAULT") -type f \( -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.html" \
  -o -name "*.png" -o -name "*.log" -o -name "*.tsv" -o -name "*.sqlite" -o -name "*.cu" -o -name "*.yaml" \) \
  -size -20M ! -name "tokenizer*.json" ! -path "*/checkpoint-*" > /tmp/dag_files.txt
tar czf "$OUT/dag.tgz" -T /tmp/dag_files.txt 2>/dev/null
grep -E "(metrics|curves)\.json$|\.log$|\.tsv$|report\.(md|html)$" /tmp/dag_files.txt | grep -v "/best" \
  | while read -r f; do mkdir -p "$OUT/$(dirname "${f#/}")" && cp "$f" "$OUT/${f#/}"; done

python - "$DEFAULT" <<'EOF' | tee "$OUT/summary.txt"
import csv, json, sys
from pathlib import Path

default = Path(sys.argv[1])
def metrics(folder):
    try:
        return json.loads((folder / "metrics.json").read_text())
    except (OSError, ValueError):
        return None

def seconds(stage):
    try:
        rows = list(csv.DictReader(open(f"results/benchmarks/{stage}.tsv"), delimiter="\t"))
        return float(rows[-1]["s"])
    except (OSError, KeyError, IndexError, ValueError):
        return None

def clipped(folder):
    """Share of the last step's completions cut at max_completion_length: the full-length sequences
    whose memory the run was after."""
    try:
        return json.loads((folder / "curves.json").read_text())[-1].get("clipped_ratio")
    except (OSError, ValueError, IndexError):
        return None

def oom(log):
    try:
        return "out of memory" in Path(log).read_text().lower()
    except OSError:
        return False

rows = []
for stage in ("corpus", "tokenizer", "tune", "pretrain", "rl_general", "rl_hgemm", "sample", "bench", "report"):
    folder = Path("results") / stage
    rows.append((f"gpu-quick {stage}", folder, metrics(folder), seconds(stage), f"results/logs/{stage}.log"))
for stage in ("rl_general", "rl_hgemm") if default.exists() else ():
    m = metrics(default / stage)
    rows.append((f"default {stage}", default / stage, m, m and m.get("wall_time_s"), default / f"{stage}.log"))
print(f"{'stage':<22} {'status':<8} {'seconds':>8} {'steps':>6} {'peak GiB':>9} {'clipped':>8}")
for name, folder, m, s, log in rows:
    train = (m or {}).get("train") or {}
    status = "ok" if m else ("OOM" if oom(log) else "failed")
    peak, cut = train.get("peak_gpu_memory_gib"), clipped(folder)
    cells = ("" if s is None else f"{s:.0f}", str(train.get("global_step", "")),
             "" if peak is None else f"{peak:.1f}", "" if cut is None else f"{cut:.2f}")
    print(f"{name:<22} {status:<8} {cells[0]:>8} {cells[1]:>6} {cells[2]:>9} {cells[3]:>8}")
EOF
echo "call: $(( $(date +%s) - call_start )) s"

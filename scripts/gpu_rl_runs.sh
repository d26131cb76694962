#!/usr/bin/env bash
# configs/gpu-rl.yaml, the whole DAG, on one H200 across calls of under 10 minutes each:
#   bash scripts/gpu_rl_runs.sh            # call it again as soon as it returns, until it says "done"
#   TARGET=pretrain bash scripts/gpu_rl_runs.sh    # corpus, tokenizer, pretrain only
#   CALL_SECONDS=300 bash scripts/gpu_rl_runs.sh   # return after 300 s (default 570)
# The DAG outlives the call: it runs as a detached process (setsid) in a copy of the checkout under
# /tmp, so the machine's next call finds it running with its weights beside it. The weights never leave
# the machine, and the machine is given back ~30 s after a call ends: a call that comes later finds a
# fresh host, and the script then says so and starts the DAG from scratch. Each call waits until the DAG
# ends or CALL_SECONDS pass, then packs results/gpu-rl and the stopped stages' progress in work/gpu-rl
# (no weights) into $OUT/rl_run.tgz with the Snakemake log, and prints the finished stages' times.
source scripts/gpu_env.sh
call_start=$(date +%s)
CALL_SECONDS=${CALL_SECONDS:-570}
TREE=/tmp/gpu-rl-tree
LOG=$TREE/snakemake.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt"

# The DAG holds LOCK for as long as any of its processes lives (flock's descriptor is inherited by
# snakemake and every stage it starts), whatever became of the process that started it: a pid would not
# say (the device tool runs commands with job control, so setsid forks and $! names a process that
# exits at once).
LOCK=/tmp/gpu-rl.lock
if ! flock -n "$LOCK" true; then
  echo "the DAG is running (started $(( call_start - $(stat -c %Y "$TREE/dag_start") )) s ago)"
elif [ -f "$TREE/dag_rc" ]; then
  echo "the DAG had already ended (exit $(cat "$TREE/dag_rc"))"
else
  [ -d "$TREE" ] && echo "the DAG's processes are gone without an exit status: starting again"
  [ -d "$TREE" ] || echo "a fresh machine: starting the DAG"
  rm -rf "$TREE"
  mkdir -p "$TREE"
  # a copy of the checkout: the next call's copy of the working tree must not touch the running DAG's files
  tar cf - --exclude=./results --exclude=./work --exclude=./.snakemake . | tar xf - -C "$TREE"
  touch "$TREE/dag_start"
  ( cd "$TREE" && export PYTHONPATH=/tmp/site:$TREE && setsid flock "$LOCK" bash -c "snakemake ${TARGET:-all} \
      --cores all --keep-going --configfile configs/gpu-rl.yaml > '$LOG' 2>&1; echo \$? > dag_rc" \
      < /dev/null > /dev/null 2>&1 & )
  sleep 2  # until flock holds the lock: the wait below would otherwise find it free and not wait
fi

# wait for the end of the DAG or of this call's time, leaving ~20 s to pack
while ! flock -n "$LOCK" true && [ $(( $(date +%s) - call_start )) -lt $(( CALL_SECONDS - 20 )) ]; do
  sleep 5
done

cd "$TREE"
cp "$LOG" "$OUT/snakemake.log"
find results/gpu-rl -type f \( -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.html" -o -name "*.png" \
  -o -name "*.log" -o -name "*.tsv" -o -name "*.sqlite" -o -name "*.cu" -o -name "*.yaml" \) -size -20M \
  ! -name "tokenizer.json" > /tmp/rl_files.txt 2>/dev/null
# a stage stopped before its end leaves its progress in work/: the kernel database (with its WAL, which
# holds the rows not yet checkpointed into the main file) and the trainer state of its last checkpoint
find work/gpu-rl -type f \( -name "kernels.sqlite*" -o -name "trainer_state.json" \) -size -20M >> /tmp/rl_files.txt 2>/dev/null
tar czf "$OUT/rl_run.tgz" -T /tmp/rl_files.txt

echo
grep -E "Error in rule|out of memory" snakemake.log | tail -5
printf '%-18s %8s\n' stage seconds
for f in results/gpu-rl/benchmarks/*.tsv; do
  [ -f "$f" ] && printf '%-18s %8.0f\n' "$(basename "$f" .tsv)" "$(sed -n 2p "$f" | cut -f1)"
done
if [ -f dag_rc ]; then
  echo "done: snakemake exit $(cat dag_rc) after $(( $(stat -c %Y dag_rc) - $(stat -c %Y dag_start) )) s"
else
  echo "running: $(( $(date +%s) - $(stat -c %Y dag_start) )) s so far; call again now"
fi

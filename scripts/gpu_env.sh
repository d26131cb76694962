# Source on the GPU machine: installs the carried wheels (.whl/) into /tmp/site and sets the paths.
# The image lacks pycuda, trl, datasets, snakemake, deepspeed, nvmath-python, datasketch, nvidia-cutlass
# (the corpus's CUTLASS/CuTe sources) and nvidia-cuda-nvdisasm; .whl/ carries them (see README).
set -u
# installed once a machine, and again when .whl/ holds other wheels than the ones installed
if [ -d .whl ] && [ "$(ls .whl/*.whl 2>/dev/null)" != "$(cat /tmp/site/.installed 2>/dev/null)" ]; then
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && ls .whl/*.whl > /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
# a module missing here fails a stage minutes into a run, or leaves cuBLASLt out of every bench (nvmath):
# stop the job before it spends device time
python3 - <<'PY' || { echo "gpu_env.sh: carry the missing packages' wheels in .whl/ (README.md, Run)" >&2; exit 1; }
import importlib.util, sys
missing = [m for m in ("pycuda", "trl", "datasets", "snakemake", "deepspeed", "nvmath", "datasketch", "cutlass_library")
           if importlib.util.find_spec(m) is None]
if missing:
    print(f"gpu_env.sh: not importable here: {', '.join(missing)}", file=sys.stderr)
    sys.exit(1)
PY
export PATH=/tmp/site/bin:$PATH
# rules call `python`; some images only have python3
command -v python >/dev/null || { mkdir -p /tmp/site/bin && ln -sf "$(command -v python3)" /tmp/site/bin/python; }
export HGEMM_CACHE=${HGEMM_CACHE:-/tmp/hgemm-cache}
export PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# The pipeline's library, configs/gpu-rl.yaml's tune.reuse merged, into results/pipeline_library
merge_pipeline_library() {
  local libraries
  read -r -a libraries < <(python3 -c "import yaml; print(*yaml.safe_load(open('configs/gpu-rl.yaml'))['tune']['reuse'])")
  python3 -m hgemm.cli merge "${libraries[@]}" --out results/pipeline_library > /dev/null
}
# The pipeline's library pinned on the shapes of grid $1 as hgemm.matmul's first-call search over $2
# kernels chooses, once a search timer of SEARCH_TIMERS (default: stream, the op's own; results/autotuned,
# the graph timer's results/autotuned_graph), then all benched beside every baseline into $OUT/$3.json and
# $3_libraries.md; the libraries side by side last
pin_and_bench_search() {
  local grid=$1 top=$2 run=$3 timer name libraries=(--library results/pipeline_library) names=pipeline_library
  merge_pipeline_library || return 1
  for timer in ${SEARCH_TIMERS:-stream}; do
    name=autotuned; [ "$timer" = stream ] || name=autotuned_$timer
    timeout 200 python3 -m hgemm.cli pin results/pipeline_library --grid "$grid" --autotune "$top" \
      --search-timer "$timer" --out "results/$name" > "$OUT/pin_$name.log" 2>&1
    echo "pin --autotune $top --search-timer $timer: rc $?"; tail -1 "$OUT/pin_$name.log"
    cp "results/$name/table.json" "$OUT/${name}_table.json" 2>/dev/null
    libraries+=(--library "results/$name"); names+=",$name"
  done
  timeout 300 python3 -m hgemm.cli bench "${libraries[@]}" --grid "$grid" --out "$OUT/$run.json" \
    > "$OUT/$run.log" 2>&1
  echo "bench: rc $?"
  python3 -m hgemm.cli summarize "$OUT/$run.json" --libraries "$names" \
    --out "$OUT/${run}_libraries.md" | grep "^| all\|^| class\|^| TN"
}

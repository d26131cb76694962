#!/usr/bin/env bash
# The narrow kernels as they are now, on the six shapes whose times benchmarks/narrow/README.md wrote
# down before the run (benchmarks/narrow/expected.yaml): every narrow variant that applies to one of
# them, the committed library's choice and every baseline, verified and timed in one bench run. Under
# a minute on one H200 (46 s). Raw results in $OUT/expected.json; a short table last.
source scripts/gpu_env.sh
set -o pipefail
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
kernels=/tmp/narrow_kernels
rm -rf "$kernels" && mkdir -p "$kernels"
python3 -m hgemm.cli merge benchmarks/tune benchmarks/sample_tune --out results/committed > /dev/null || exit 1
# every narrow variant that applies to one of the shapes, and the committed library's choice for each
python3 - "$kernels" <<'PY' || exit 1
import shutil, sys
from pathlib import Path
from hgemm.library import Library
from hgemm.problem import load_grid
from kernels_corpus.families import narrow
out = Path(sys.argv[1])
problems = load_grid("benchmarks/narrow/expected.yaml")
for p in narrow.variants():
    if any(narrow.applicable(p, problem) for problem in problems):
        (out / f"{narrow.name(p)}.cu").write_text(narrow.render(p))
library = Library("results/committed")
for problem in problems:
    name = library.lookup(problem).name
    shutil.copy(library.path / "kernels" / f"{name}.cu", out / f"{name}.cu")
PY
timeout 170 python3 -m hgemm.cli bench --kernels "$kernels" \
  --grid benchmarks/narrow/expected.yaml --reps 5 --out "$OUT/expected.json" > "$OUT/expected.log" 2>&1
echo "bench: rc $?"
python3 benchmarks/narrow/expected_table.py "$OUT/expected.json"

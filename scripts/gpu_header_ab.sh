#!/usr/bin/env bash
# A device header against another version of it, on the same kernel texts, on one GPU:
#   mkdir -p .ab && git show REV:hgemm/include/hgemm/NAME.cuh > .ab/NAME.cuh    # here (.ab/ is git-ignored)
#   bash scripts/gpu_header_ab.sh GRID KERNEL...                                 # there, carrying .whl and .ab
# KERNEL: seed-family kernel names (their current renders). The kernels are benched on GRID beside every
# baseline twice, each run verifying every kernel on fresh inputs: with the working tree's headers
# ($OUT/working.json) and with each header of .ab/ put in their place ($OUT/other.json); the compile
# cache is keyed by the headers' hash, so the second run compiles anew. Same machine, same call; the
# ratio of a kernel's two times is what the header change did to it.
grid=${1:?usage: bash scripts/gpu_header_ab.sh GRID KERNEL...}
shift
[ $# -gt 0 ] && [ -d .ab ] || { echo "name the kernels, and put the other headers in .ab/"; exit 2; }
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
kernels=$(mktemp -d)
for name in "$@"; do
  python3 -c "from hgemm.cost import family_text; import sys; t = family_text('$name'); t or sys.exit('no family kernel $name'); print(t, end='')" \
    > "$kernels/$name.cu" || exit 2
done
timeout 240 python3 -m hgemm.cli bench --kernels "$kernels" --grid "$grid" --out "$OUT/working.json" > "$OUT/working.log" 2>&1
echo "working tree's headers: rc $?"
for header in .ab/*.cuh; do cp "$header" "hgemm/include/hgemm/$(basename "$header")"; done
timeout 240 python3 -m hgemm.cli bench --kernels "$kernels" --grid "$grid" --out "$OUT/other.json" > "$OUT/other.log" 2>&1
echo "the other headers: rc $?"
python3 - "$OUT/working.json" "$OUT/other.json" <<'PY'
import json, sys
from hgemm.summary import geomean
runs = [{(r["problem"]["M"], r["problem"]["N"], r["problem"]["K"], r["problem"]["batch"], r["problem"]["layout"], n): c["time_us"]
         for r in json.load(open(path))["problems"] for n, c in r["candidates"].items() if c.get("status") == "ok"}
        for path in sys.argv[1:]]
ratios = [runs[1][k] / runs[0][k] for k in runs[0] if k in runs[1]]
print(f"{len(ratios)} kernel-shape pairs: other / working time, geomean {geomean(ratios):.3f}, "
      f"range {min(ratios):.3f}-{max(ratios):.3f}")
PY

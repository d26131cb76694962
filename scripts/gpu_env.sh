# Source on the GPU machine: installs the carried wheels (.whl/) into /tmp/site and sets the paths.
# The image lacks pycuda, trl, datasets, snakemake, deepspeed, nvmath-python, datasketch, nvidia-cutlass
# (the corpus's CUTLASS/CuTe sources) and nvidia-cuda-nvdisasm; .whl/ carries them (see README).
set -u
if [ -d .whl ] && [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:$PATH
# rules call `python`; some images only have python3
command -v python >/dev/null || { mkdir -p /tmp/site/bin && ln -sf "$(command -v python3)" /tmp/site/bin/python; }
export HGEMM_CACHE=${HGEMM_CACHE:-/tmp/hgemm-cache}
export PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"

# The pipeline: corpus -> tokenizer -> pretrain -> rl_general -> rl_hgemm -> sample -> bench -> report,
# with the seed-kernel library (tune) feeding rl_hgemm and bench. Rules only wire paths; every stage
# is `python -m stages.<stage>` (see docs/dag.md for the cookbook).
#
#   snakemake -n                                   # what would run
#   snakemake --cores all                          # everything (on a CPU-only machine: the smoke sizes)
#   snakemake --cores 2 --configfile configs/smoke.yaml   # the CPU-sized run
import os
import shutil
from pathlib import Path

import yaml
from snakemake.utils import min_version, validate

min_version("8.20")


configfile: "configs/default.yaml"


# A machine without a GPU runs the small, honest version: kernels are compiled but nothing is timed,
# and the report says so at the top. HGEMM_FULL=1 forces the full configuration anyway.
if shutil.which("nvidia-smi") is None and os.environ.get("HGEMM_FULL") != "1":

    configfile: "configs/smoke.yaml"


validate(config, "configs/schema.yaml")

RESULTS = config["results"]
WORK = config["work"]


def stage_config(stage):
    """{results}/.config/<stage>.yaml: only this stage's section, rewritten only when it changed.

    Rules take it as an input, so its mtime says whose settings moved: editing one section reruns that
    stage and what follows it, and nothing upstream (a whole-config input would rerun everything)."""
    path = Path(RESULTS, ".config", f"{stage}.yaml")
    text = yaml.safe_dump({stage: config[stage]}, sort_keys=True)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return str(path)


def out(stage, name=""):
    return f"{RESULTS}/{stage}/{name}" if name else f"{RESULTS}/{stage}"


def log(stage):
    return f"{RESULTS}/logs/{stage}.log"


def bench_file(stage):
    return f"{RESULTS}/benchmarks/{stage}.tsv"


rule all:
    default_target: True
    input:
        out("report", "report.html"),


include: "rules/corpus.smk"
include: "rules/tokenizer.smk"
include: "rules/pretrain.smk"
include: "rules/tune.smk"
include: "rules/rl_general.smk"
include: "rules/rl_hgemm.smk"
include: "rules/sample.smk"
include: "rules/bench.smk"
include: "rules/report.smk"

# The pipeline: corpus -> tokenizer -> pretrain -> rl_general -> rl_hgemm -> sample -> bench -> library
# -> report, with the seed-kernel library (tune) feeding rl_hgemm, bench and the final library. Rules only wire paths; every stage
# is `python -m stages.<stage>` (see docs/dag.md for the cookbook).
#
#   snakemake -n                                   # what would run
#   snakemake --cores all                          # everything (on a CPU-only machine: the smoke sizes)
#   snakemake --cores 2 --configfile configs/smoke.yaml   # the CPU-sized run
import os
import shutil
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from stages.config_schema import config_sources, validate_config

# 9.14: an output flagged update() is left in place while its job runs and restored if the job fails
min_version("9.14")


configfile: "configs/default.yaml"


# A machine without a GPU runs the small, honest version: kernels are compiled but nothing is timed,
# and the report says so at the top. HGEMM_FULL=1 forces the full configuration anyway.
if shutil.which("nvidia-smi") is None and os.environ.get("HGEMM_FULL") != "1":

    configfile: "configs/smoke.yaml"


# one line naming the file and key on a bad config (stages/config_schema.py), before any rule is built
validate_config(config, "configs/schema.yaml", *config_sources(workflow))

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


def config_file(*keys):
    """The file a setting names (e.g. config_file("sample", "grid")), as a rule input. A missing one
    stops the run here, naming the setting: Snakemake would otherwise drop the job whose input is
    missing, keep that rule's old outputs and build what follows from them. Empty for a setting that
    holds no path (rl_hgemm.shapes.grid may be an inline grid)."""
    value = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, str):
        return []
    if not Path(value).is_file():
        raise WorkflowError(f"{'.'.join(keys)}: {value} does not exist")
    return value


def config_files(keys, name=None):
    """The files a list setting names (e.g. corpus.tuned_exclude_grids), or `name` in each folder it
    names (every corpus.tuned library's table.json), as rule inputs; a missing one stops the run here,
    naming the setting, like config_file."""
    value = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    files = [f"{entry}/{name}" if name else entry for entry in value or []]
    for path in files:
        if not Path(path).is_file():
            raise WorkflowError(f"{'.'.join(keys)}: {path} does not exist")
    return files


def out(stage, name=""):
    return f"{RESULTS}/{stage}/{name}" if name else f"{RESULTS}/{stage}"


def log(stage):
    return f"{RESULTS}/logs/{stage}.log"


def bench_file(stage):
    return f"{RESULTS}/benchmarks/{stage}.tsv"


def every_output(wildcards):
    """Every stage's declared outputs. Snakemake reruns a job with missing outputs only when a job
    downstream has to run anyway, so a deleted stage output would go unnoticed behind a newer report;
    as inputs of `all` they are all targets of a plain `snakemake`."""
    return sorted({str(f) for r in workflow.rules if r.name != "all" for f in r.output})


rule all:
    default_target: True
    input:
        every_output,


include: "rules/corpus.smk"
include: "rules/tokenizer.smk"
include: "rules/pretrain.smk"
include: "rules/tune.smk"
include: "rules/rl_general.smk"
include: "rules/rl_hgemm.smk"
include: "rules/sample.smk"
include: "rules/bench.smk"
include: "rules/library.smk"
include: "rules/report.smk"

"""configs/schema.yaml: every config the project ships passes; every section and subsection lists
exactly the keys its stage's dataclass takes (so an unknown key fails the dry run, not the stage), and
configs/default.yaml names exactly those keys (the one place their values are defined); numbers are
bounded; defaults stay out of the schema; and a failure is one line naming the file and key."""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from conftest import ROOT
from stages.config_schema import config_sources, first_error, load_schema, validate_config

SCHEMA = load_schema()
CONFIGS = ["default.yaml", "smoke.yaml", "gpu-quick.yaml", "gpu-rl.yaml"]

# schema section -> (file, dataclass) whose fields are the section's keys. Read from the source, so
# this needs neither torch nor transformers.
SECTIONS = {
    ("corpus",): ("kernels_corpus/build.py", "CorpusConfig"),
    ("tokenizer",): ("kernels_corpus/tokenizer.py", "TokenizerConfig"),
    ("pretrain", "model"): ("training/model.py", "ModelSettings"),
    ("pretrain", "train"): ("training/pretrain.py", "TrainSettings"),
    ("pretrain", "sample"): ("training/pretrain.py", "SampleSettings"),
    ("tune",): ("stages/tune.py", "TuneSettings"),
    ("rl_general", "tasks"): ("training/rl_general.py", "TaskSettings"),
    ("rl_general", "probe"): ("training/probe.py", "ProbeSettings"),
    ("rl_hgemm", "shapes"): ("training/heldout.py", "ShapeSettings"),
    ("rl_hgemm", "context"): ("training/context.py", "ContextSettings"),
    ("sample",): ("training/best_of_k.py", "SampleSettings"),
    ("bench",): ("stages/bench.py", "BenchSettings"),
    ("report",): ("hgemm/report/build.py", "ReportSettings"),
}
SHARED = {  # the RL sections' subsections, one definition for both stages
    "judge": ("training/grpo.py", "JudgeSettings"),
    "reward": ("training/rewards.py", "RewardSettings"),
}


def dataclass_fields(path: str, name: str) -> set[str]:
    """The fields of a dataclass, its bases' defined in the same file included."""
    tree = ast.parse((ROOT / path).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    inherited = set().union(*(dataclass_fields(path, b.id) for b in cls.bases if isinstance(b, ast.Name)))
    return inherited | {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)}


def resolve(node: dict) -> dict:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def section(*keys: str) -> dict:
    node = SCHEMA
    for k in keys:
        node = resolve(node["properties"][k])
    return node


def merged(name: str) -> dict:
    """A config file laid over configs/default.yaml the way Snakemake merges them."""
    def merge(a: dict, b: dict) -> dict:
        out = copy.deepcopy(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    default = yaml.safe_load((ROOT / "configs/default.yaml").read_text())
    return merge(default, yaml.safe_load((ROOT / "configs" / name).read_text()))


def one_line(config: dict, files: list[str]) -> str:
    with pytest.raises(SystemExit) as e:
        validate_config(config, ROOT / "configs/schema.yaml", files)
    assert isinstance(e.value.code, str) and "\n" not in e.value.code
    return e.value.code


@pytest.mark.parametrize("name", CONFIGS)
def test_every_shipped_config_passes(name):
    error, _ = first_error(merged(name), SCHEMA)
    assert error is None, error.message


@pytest.mark.parametrize("keys", list(SECTIONS), ids=".".join)
def test_sections_list_exactly_their_dataclass_fields(keys):
    assert set(section(*keys)["properties"]) == dataclass_fields(*SECTIONS[keys])


@pytest.mark.parametrize("sub", list(SHARED))
def test_rl_subsections_list_exactly_their_dataclass_fields(sub):
    for stage in ("rl_general", "rl_hgemm"):
        assert set(section(stage, sub)["properties"]) == dataclass_fields(*SHARED[sub]), (stage, sub)
    assert set(section("rl_general")["properties"]) == {"tasks", "grpo", "probe", *SHARED}
    assert set(section("rl_hgemm")["properties"]) == {"start_from", "shapes", "context", "grpo", "probe", "rft",
                                                      *SHARED}
    assert set(section("rl_hgemm", "probe")["properties"]) == dataclass_fields("training/probe.py",
                                                                                "ContextProbeSettings")
    assert set(section("rl_hgemm", "rft")["properties"]) == dataclass_fields("training/rft.py", "RFTSettings")


def test_default_config_names_every_key_the_schema_allows():
    """configs/default.yaml is the one place every setting's value is defined: the stages' dataclasses
    hold no defaults, so each key the schema allows (the dataclass fields; for grpo, the TRL settings we
    set) has its value there, and nothing else."""
    default = yaml.safe_load((ROOT / "configs/default.yaml").read_text())

    def walk(node: dict, data, where: str):
        if "properties" not in node or node.get("additionalProperties") is not False:
            return  # a value, or a free-form mapping (source_weights, an inline grid)
        assert isinstance(data, dict), where
        assert set(data) == set(node["properties"]), (where, set(data) ^ set(node["properties"]))
        for key, sub in node["properties"].items():
            walk(resolve(sub), data[key], f"{where}.{key}")

    walk(SCHEMA, default, "default.yaml")


def test_unknown_keys_are_refused_at_every_level_and_no_defaults_are_repeated():
    def walk(node, where):
        if isinstance(node, dict):
            assert "default" not in node, f"{where}: defaults live in configs/default.yaml"
            # a conditional's if/else constrain keys their object's schema already closes
            if "properties" in node and where.rsplit(".", 1)[-1] not in ("if", "then", "else"):
                assert node.get("additionalProperties") is False, f"{where}: unknown keys pass"
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(SCHEMA, "schema")


def test_enums_are_the_harness_ones():
    from hgemm.entry import BASELINES, DISTRIBUTIONS, TIMING_METHODS

    assert SCHEMA["$defs"]["timing_method"]["enum"] == list(TIMING_METHODS)
    assert SCHEMA["$defs"]["baseline"]["enum"] == list(BASELINES)
    assert SCHEMA["$defs"]["judge"]["properties"]["distributions"]["items"]["enum"] == list(DISTRIBUTIONS)


@pytest.mark.parametrize("change, line", [
    ({"rl_hgemm": {"grpo": {"max_stepz": 5}}}, "rl_hgemm.grpo: unknown key 'max_stepz' (did you mean 'max_steps'?)"),
    ({"samples": {"k": 1}}, "unknown key 'samples' (did you mean 'sample'?)"),
    ({"tune": {"reps": -3}}, "tune.reps: -3 is less than the minimum of 1"),
    ({"sample": {"k": 0}}, "sample.k: 0 is less than the minimum of 1"),
    ({"pretrain": {"train": {"learning_rate": 0}}}, "pretrain.train.learning_rate: 0 is less than or equal to the "
                                                    "minimum of 0"),
    ({"rl_general": {"grpo": {"num_generations": 1}}}, "rl_general.grpo.num_generations: 1 is less than the "
                                                       "minimum of 2"),
    ({"bench": {"baselines": ["cublas", "foo"]}}, "bench.baselines[1]: 'foo' is not one of"),
    ({"rl_hgemm": {"grpo": {"bf16": "auto", "cache_implementation": "static"}}}, "rl_hgemm.grpo.cache_implementation: 'static': "
                                                                  "a static KV cache needs bf16: false here"),
    ({"pretrain": {"train": {"source_weights": {"refrence": 2}}}}, "pretrain.train.source_weights: 'refrence' is "
                                                                   "not one of"),
])
def test_a_bad_override_is_one_line_naming_its_file(tmp_path, change, line):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(change))
    config = merged("smoke.yaml")
    for key, value in change.items():
        node = config.setdefault(key, {})
        for k, v in value.items():
            if isinstance(v, dict) and isinstance(node.get(k), dict):
                node[k].update(v)
            else:
                node[k] = v
    msg = one_line(config, [str(ROOT / "configs/default.yaml"), str(ROOT / "configs/smoke.yaml"), str(bad)])
    assert msg.startswith(f"{bad}: {line}"), msg
    assert len(msg) < 300


def test_the_file_named_is_the_one_that_set_the_key(tmp_path):
    config = merged("smoke.yaml")
    config["report"]["peak_tflops"] = -1  # as if smoke.yaml had set it
    smoke = tmp_path / "smoke.yaml"
    smoke.write_text("report:\n  peak_tflops: -1\n")
    other = tmp_path / "other.yaml"
    other.write_text("sample:\n  k: 2\n")
    msg = one_line(config, [str(ROOT / "configs/default.yaml"), str(smoke), str(other)])
    assert msg == f"{smoke}: report.peak_tflops: -1 is less than or equal to the minimum of 0"
    with pytest.raises(SystemExit) as e:
        validate_config(config, ROOT / "configs/schema.yaml", [str(ROOT / "configs/default.yaml")],
                        {"report": {"peak_tflops": -1}})
    assert e.value.code.startswith("--config: report.peak_tflops")


def test_config_sources_put_the_command_line_last():
    wf = SimpleNamespace(configfiles=["/w/bad.yaml", "configs/default.yaml", "configs/smoke.yaml"],
                         overwrite_configfiles=["/w/bad.yaml"], config_settings=SimpleNamespace(config={"a": 1}))
    assert config_sources(wf) == (["configs/default.yaml", "configs/smoke.yaml", "/w/bad.yaml"], {"a": 1})


def test_the_dry_run_stops_on_an_unknown_nested_key(tmp_path):
    pytest.importorskip("snakemake")
    wf = tmp_path / "wf"
    wf.mkdir()
    for name in ("Snakefile", "rules", "profiles", "hgemm", "stages", "training", "kernels_corpus", "configs"):
        (wf / name).symlink_to(ROOT / name)
    (wf / "bad.yaml").write_text("rl_hgemm:\n  grpo:\n    max_stepz: 5\n")
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", "bad.yaml"],
                       cwd=wf, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "bad.yaml: rl_hgemm.grpo: unknown key 'max_stepz' (did you mean 'max_steps'?)" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr and len((r.stdout + r.stderr).splitlines()) <= 5
    assert not (wf / "results").exists()  # validated before any stage section was written

"""The corpus/tokenizer config sections: valid, in sync with the dataclass defaults, and CLIs document every flag."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_corpus.build import CorpusConfig
from kernels_corpus.harvest import PROJECT_ROOT
from kernels_corpus.tokenizer import TokenizerConfig
from stages.common import build_dataclass, load_stage_config

SECTIONS = PROJECT_ROOT / "configs" / "sections"


@pytest.mark.parametrize("name, section, cls", [
    ("corpus.yaml", "corpus", CorpusConfig), ("tokenizer.yaml", "tokenizer", TokenizerConfig),
])
def test_default_sections_equal_dataclass_defaults(name, section, cls):
    cfg = build_dataclass(cls, load_stage_config(SECTIONS / name, section), section)
    assert cfg == cls(), f"configs/sections/{name} and {cls.__name__} defaults have drifted apart"


def test_smoke_sections_are_valid_and_small():
    corpus = build_dataclass(CorpusConfig, load_stage_config(SECTIONS / "corpus-smoke.yaml", "corpus"), "corpus")
    tok = build_dataclass(TokenizerConfig, load_stage_config(SECTIONS / "tokenizer-smoke.yaml", "tokenizer"), "t")
    assert corpus.max_docs_per_package and corpus.max_docs_per_package <= 200
    assert 2000 <= tok.vocab_size <= 4096
    assert {f.name for f in dataclasses.fields(CorpusConfig)} == set(
        load_stage_config(SECTIONS / "corpus-smoke.yaml", "corpus"))


def test_unknown_setting_is_named():
    with pytest.raises(ValueError, match="vocab"):
        build_dataclass(CorpusConfig, {"vocab": 3}, "corpus")


@pytest.mark.parametrize("module", ["stages.corpus", "stages.tokenizer"])
def test_every_flag_has_help(module, capsys):
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(module).main(["--help"])
    text = capsys.readouterr().out
    for flag in ["--config", "--out", "--set", "--no-progress"]:
        assert flag in text
    assert "--corpus" in text or module == "stages.corpus"

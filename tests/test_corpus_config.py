"""The corpus/tokenizer settings: built from configs/default.yaml (alone and with smoke.yaml over it),
unknown and missing settings named, and CLIs document every flag."""

from __future__ import annotations

import pytest

from configured import section, settings
from kernels_corpus.build import CorpusConfig
from kernels_corpus.tokenizer import TokenizerConfig
from stages.common import build_dataclass


@pytest.mark.parametrize("smoke", [False, True])
def test_configs_build_the_settings(smoke):
    corpus = settings(CorpusConfig, "corpus", smoke=smoke)
    tok = settings(TokenizerConfig, "tokenizer", smoke=smoke)
    if smoke:
        assert corpus.max_docs_per_package and corpus.max_docs_per_package <= 200
        assert 2000 <= tok.vocab_size <= 4096
    else:
        assert corpus.max_docs_per_package is None and tok.vocab_size > 1000


def test_unknown_and_missing_settings_are_named():
    with pytest.raises(ValueError, match="vocab"):
        build_dataclass(CorpusConfig, {**section("corpus"), "vocab": 3}, "corpus")
    partial = section("corpus")
    del partial["dedup_threshold"]
    with pytest.raises(ValueError, match=r"corpus: missing setting\(s\) \['dedup_threshold'\]"):
        build_dataclass(CorpusConfig, partial, "corpus")


@pytest.mark.parametrize("module", ["stages.corpus", "stages.tokenizer"])
def test_every_flag_has_help(module, capsys):
    import importlib

    with pytest.raises(SystemExit):
        importlib.import_module(module).main(["--help"])
    text = capsys.readouterr().out
    for flag in ["--config", "--out", "--set", "--no-progress"]:
        assert flag in text
    assert "--corpus" in text or module == "stages.corpus"

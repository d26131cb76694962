"""The corpus tokenizer: byte-level BPE round trip, format tokens, determinism, base-model path, stage CLI."""

from __future__ import annotations

import json

import pytest

from configured import DEFAULT, settings
from kernels_corpus.tokenizer import FORMAT_TOKENS, ROLE_TOKENS, TokenizerConfig, from_base_model, train_bpe


def kernel_texts(n: int = 60) -> list[str]:
    ops = ["+", "*", "-", "fmaxf", "fminf"]
    texts = []
    for i in range(n):
        op = ops[i % len(ops)]
        expr = f"{op}(a[i], b[i])" if op.startswith("f") else f"a[i] {op} b[i]"
        texts.append(
            f"// kernel {i}: elementwise {op}, block {32 * (1 + i % 8)}\n"
            f"extern \"C\" __global__ void ew_{i}(const float* __restrict__ a, const float* __restrict__ b,\n"
            f"                              float* __restrict__ c, int n) {{\n"
            f"\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) c[i] = {expr};\n"
            f"}}\n"
        )
    return texts


TRICKY = (
    "<|problem|>M=128 N=256 K=64 batch=2\n<|candidate|>#include <cuda_fp16.h>\r\n"
    "\t\t  __shared__ __half s[64][65];  // ünïcödé ✓ 半精度\n\n\n    x <<<g, b>>>();<|end|>"
)


@pytest.fixture(scope="module")
def trained():
    return train_bpe(kernel_texts(), vocab_size=400, min_frequency=2, progress=False)


def test_round_trip_is_exact(trained):
    for text in kernel_texts(5) + [TRICKY, "", " leading space", "\x00\x7f bytes"]:
        ids = trained.encode(text, add_special_tokens=False)
        assert trained.decode(ids) == text


def test_format_and_role_tokens_are_single_ids(trained):
    for token in list(FORMAT_TOKENS) + list(ROLE_TOKENS.values()):
        ids = trained.encode(token, add_special_tokens=False)
        assert len(ids) == 1 and ids[0] < 6
    assert (trained.bos_token, trained.eos_token, trained.pad_token) == tuple(ROLE_TOKENS.values())
    ids = trained.encode(TRICKY, add_special_tokens=False)
    assert trained.decode(ids, skip_special_tokens=True).startswith("M=128")


def test_save_load_and_determinism(trained, tmp_path):
    from transformers import AutoTokenizer

    trained.save_pretrained(tmp_path / "a")
    again = train_bpe(kernel_texts(), vocab_size=400, min_frequency=2, progress=False)
    again.save_pretrained(tmp_path / "b")
    assert json.loads((tmp_path / "a/tokenizer.json").read_text()) == json.loads((tmp_path / "b/tokenizer.json").read_text())
    loaded = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert loaded.encode(TRICKY, add_special_tokens=False) == trained.encode(TRICKY, add_special_tokens=False)


def test_base_model_tokenizer_gets_format_tokens(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(kernel_texts(20), trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>").save_pretrained(tmp_path / "base")
    tok = from_base_model(str(tmp_path / "base"))
    assert tok.eos_token == "<eos>"  # the base model's own role tokens are kept
    assert tok.pad_token == ROLE_TOKENS["pad_token"]
    for token in FORMAT_TOKENS:
        assert len(tok.encode(token, add_special_tokens=False)) == 1
    assert tok.decode(tok.encode(TRICKY, add_special_tokens=False)) == TRICKY


def test_stage_cli_on_a_tiny_corpus(tmp_path):
    from datasets import Dataset, DatasetDict

    from stages.tokenizer import main

    def split(texts):
        return Dataset.from_dict({"text": texts, "source": ["package"] * len(texts), "package": ["p"] * len(texts),
                                  "licence": ["MIT"] * len(texts)})

    texts = kernel_texts()
    DatasetDict({"train": split(texts[:50]), "validation": split(texts[50:])}).save_to_disk(
        str(tmp_path / "corpus" / "dataset"))
    cfg = tmp_path / "tok.yaml"
    cfg.write_text("tokenizer:\n  vocab_size: 500\n  min_frequency: 2\n")
    out = tmp_path / "tok"
    assert main(["--config", str(DEFAULT), "--config", str(cfg), "--corpus", str(tmp_path / "corpus"), "--out", str(out),
                 "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    assert metrics["bytes_per_token"] > 1.5 and metrics["bytes_per_token_split"] == "validation"
    assert stats["by_licence"][0]["licence"] == "MIT" and stats["splits"]["validation"]["docs"] == 10
    assert (out / "tokenizer.json").exists() and not any(p.name.startswith(".") for p in out.iterdir())
    assert settings(TokenizerConfig, "tokenizer").vocab_size > 1000

"""Shared test setup: GPU tests run only where a GPU and the GPU stack are present."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    if not shutil.which("nvidia-smi"):
        return "no GPU: nvidia-smi not found"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"no GPU: nvidia-smi failed ({e})"
    if "GPU " not in out:
        return "no GPU listed by nvidia-smi"
    for mod in ("pycuda", "cupy", "torch"):
        if importlib.util.find_spec(mod) is None:
            return f"GPU present but {mod} is not installed (pip install -e '.[gpu]')"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cubin_cache(tmp_path_factory):
    # tests must not depend on (or pollute) a user's compile cache
    os.environ.setdefault("HGEMM_CACHE", str(tmp_path_factory.mktemp("cubin-cache")))
    yield


def read_kernel(rel: str) -> str:
    return (ROOT / rel).read_text()


def with_spec(spec_body: str, entry: str = "k") -> str:
    """A candidate text: the launch spec `spec_body` and an empty kernel named `entry` with the HGEMM ABI."""
    return (f"/*@launch\n{spec_body}\n@*/\n"
            f'extern "C" __global__ void {entry}(const __half* A, const __half* B, __half* C, int M, int N, int K, '
            f"int batch, void* workspace) {{}}\n")


def named_kernel(name: str, layouts: str = "NN, TN", tail: str = "") -> str:
    """A candidate the harness parses, named in a first-line comment `name()` that tests look for in
    prompts; `tail` lengthens that comment."""
    return f"// {name}(){tail}\n" + with_spec(f"entry: {name}\nblock: 32\ngrid: 1\nlayouts: {layouts}", name)


def write_library(folder: Path, kernels: dict[str, str], entries: dict[str, str], fallback: str) -> Path:
    """A library folder as `hgemm tune` writes it: kernels/<name>.cu and a table mapping problem keys
    to kernel names, for dispatch tests."""
    import json

    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    for name, text in kernels.items():
        (folder / "kernels" / f"{name}.cu").write_text(text)
    table = {"fallback": fallback, "entries": {key: {"kernel": name} for key, name in entries.items()}}
    (folder / "table.json").write_text(json.dumps(table))
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A tokenizer and a ~50k-parameter Llama saved in one folder, the way stages.pretrain's --out is (the RL
    stages' and RFT's tests)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from hgemm.problem import Problem
    from kernels_corpus.tasks import load_tasks
    from training.prompts import SPECIAL_TOKENS, format_problem_prompt

    naive = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()

    docs = [t.prompt() + t.solution for t in load_tasks()[:8]] + [format_problem_prompt(Problem(64, 64, 64)) + naive]
    roles = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=list(roles.values()) + list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(docs, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, additional_special_tokens=list(SPECIAL_TOKENS),
                                  clean_up_tokenization_spaces=False, **roles)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    path = tmp_path_factory.mktemp("tiny_model")
    LlamaForCausalLM(config).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return str(path)

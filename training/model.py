"""Tokenizer and model loading shared by the pretraining and RL stages.

Two ways to get a model, chosen by `model.init` in the config:
  scratch     a Llama-style LlamaForCausalLM built from the sizes in the config, with the vocabulary
              of the project tokenizer (stages.tokenizer);
  pretrained  an existing causal code model from `name_or_path` (a local folder, or a hub id where a
              hub is reachable), continued on our corpus. Its embeddings are resized when the
              tokenizer has more tokens than the model.

Token conventions every stage follows: a document or prompt starts with bos (when the tokenizer has
one), a document ends with eos, and generation stops at eos or `<|end|>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from training.prompts import SPECIAL_TOKENS, END_TOKEN


@dataclass
class ModelSettings:
    """The `model:` section of the pretrain config (values: configs/default.yaml)."""

    init: str  # scratch | pretrained
    name_or_path: str | None  # for init: pretrained
    # Use the pretrained model's own tokenizer (plus our special tokens) instead of --tokenizer: an
    # existing code model only makes sense with the vocabulary it was trained on.
    use_model_tokenizer: bool
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    initializer_range: float
    attn_implementation: str

    def __post_init__(self):
        if self.init not in ("scratch", "pretrained"):
            raise ValueError(f"model.init must be 'scratch' or 'pretrained', got {self.init!r}")
        if self.init == "pretrained" and not self.name_or_path:
            raise ValueError("model.init: pretrained needs model.name_or_path (a local folder or hub id)")
        if self.init == "scratch" and self.name_or_path:
            raise ValueError("model.name_or_path is set but model.init is 'scratch'; set init: pretrained")
        if self.use_model_tokenizer and self.init != "pretrained":
            raise ValueError("model.use_model_tokenizer needs init: pretrained")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("model.hidden_size must be a multiple of model.num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("model.num_attention_heads must be a multiple of model.num_key_value_heads")


def _local_only(name_or_path: str) -> bool:
    # A folder that exists is read without touching the network (the machines here have no hub).
    return Path(name_or_path).exists()


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """A tokenizer saved with save_pretrained; our three special tokens are added if missing.

    Adding them (rather than failing) lets a pretrained model's own tokenizer be used as is."""
    tok = AutoTokenizer.from_pretrained(path, local_files_only=_local_only(path))
    missing = [t for t in SPECIAL_TOKENS if t not in tok.get_vocab()]
    if missing:
        tok.add_tokens(missing, special_tokens=True)
    if tok.pad_token is None:
        # Padding only matters for batched generation (left padding, masked out); eos is a safe stand-in.
        tok.pad_token = tok.eos_token
    if tok.pad_token is None:
        raise ValueError(f"tokenizer at {path} has neither a pad nor an eos token")
    return tok


# Attention for models that sample: "eager". On the H200 (benchmarks/generation/) a
# ~90M model sampling a left-padded batch of 32 takes 68 ms a token step in bf16 with sdpa and a padding
# mask, 12.9 ms in fp32 with sdpa and 15.6 ms in bf16 with eager attention.
# Training stays on the configured implementation (sdpa: packed blocks need no mask).
SAMPLING_ATTENTION = "eager"


def tokenizer_for(settings: ModelSettings, tokenizer_dir: str | None) -> PreTrainedTokenizerBase:
    """The tokenizer a stage should use for these model settings."""
    if settings.use_model_tokenizer:
        return load_tokenizer(settings.name_or_path)
    if not tokenizer_dir:
        raise ValueError("a tokenizer directory is required (or model.use_model_tokenizer: true)")
    return load_tokenizer(tokenizer_dir)


def llama_config(settings: ModelSettings, tokenizer: PreTrainedTokenizerBase) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        max_position_embeddings=settings.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": settings.rope_theta},
        rms_norm_eps=settings.rms_norm_eps,
        tie_word_embeddings=settings.tie_word_embeddings,
        initializer_range=settings.initializer_range,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation=settings.attn_implementation,
    )


def build_model(settings: ModelSettings, tokenizer: PreTrainedTokenizerBase) -> torch.nn.Module:
    """A fresh or pretrained causal LM whose vocabulary covers the tokenizer, in fp32.

    fp32 weights on purpose: the Trainer's bf16 autocast keeps fp32 master weights, which small
    models trained from scratch need."""
    if settings.init == "scratch":
        return LlamaForCausalLM(llama_config(settings, tokenizer))
    return load_causal_lm(settings.name_or_path, tokenizer, settings.attn_implementation)


def load_causal_lm(
    name_or_path: str,
    tokenizer: PreTrainedTokenizerBase | None = None,
    attn_implementation: str = "sdpa",
    dtype: torch.dtype = torch.float32,
) -> torch.nn.Module:
    """Load a saved causal LM (our own stage output or an existing code model).

    With a tokenizer, the embeddings grow to cover tokens it has beyond the model's vocabulary
    (our special tokens), and bos/eos/pad ids follow the tokenizer."""
    model = AutoModelForCausalLM.from_pretrained(
        name_or_path,
        dtype=dtype,
        attn_implementation=attn_implementation,
        local_files_only=_local_only(name_or_path),
    )
    if tokenizer is not None:
        if len(tokenizer) > model.get_input_embeddings().num_embeddings:
            model.resize_token_embeddings(len(tokenizer))
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            setattr(model.config, name, getattr(tokenizer, name))
            if model.generation_config is not None:
                setattr(model.generation_config, name, getattr(tokenizer, name))
    return model


def stop_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Generation stops at eos or `<|end|>` (the end of a candidate)."""
    ids = [tokenizer.convert_tokens_to_ids(END_TOKEN)]
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return sorted(set(ids))


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: str) -> list[int]:
    """Token ids of a prompt, bos first, exactly as pretraining documents begin."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + ids


def count_parameters(model: torch.nn.Module) -> int:
    # Unique tensors only, so tied input/output embeddings count once.
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())

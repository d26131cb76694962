"""What keeps the RL stages inside one GPU's memory: the policy trains with sdpa and samples with eager
attention, and the configs checkpoint activations with the generation batch of the algorithm kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from training.grpo import TRAINING_ATTENTION, load_policy
from training.model import SAMPLING_ATTENTION, load_causal_lm

ROOT = Path(__file__).parents[1]


def test_policy_trains_with_sdpa_and_samples_with_eager(tiny_model_dir):
    model, tokenizer = load_policy(tiny_model_dir)
    assert (TRAINING_ATTENTION, SAMPLING_ATTENTION) == ("sdpa", "eager")
    seen = []
    model.model.layers[0].self_attn.register_forward_pre_hook(lambda m, a: seen.append(m.config._attn_implementation))
    ids = tokenizer("__global__ void", return_tensors="pt")
    model(**ids)
    assert seen == ["sdpa"]
    seen.clear()
    tokens = model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert set(seen) == {"eager"} and model.config._attn_implementation == "sdpa"
    # the same completion a model loaded for sampling writes
    eager = load_causal_lm(tiny_model_dir, tokenizer, SAMPLING_ATTENTION)
    eager.generation_config.eos_token_id = model.generation_config.eos_token_id
    assert torch.equal(tokens, eager.generate(**ids, max_new_tokens=4, do_sample=False))


def _merged(*names: str) -> dict:
    def merge(a: dict, b: dict) -> dict:
        return {**a, **{k: merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
                        for k, v in b.items()}}

    out: dict = {}
    for name in names:
        out = merge(out, yaml.safe_load((ROOT / "configs" / name).read_text()))
    return out


# Completions a step, per config and stage: 32 by default; gpu-rl's rl_hgemm samples 8 shapes x 8 in
# two micro-batches of 32 (20.6 GiB at most, benchmarks/rl_runs/rl_hgemm/metrics.json).
GENERATION = {("gpu-rl.yaml", "rl_hgemm"): 64}


@pytest.mark.parametrize("configs", [("default.yaml",), ("default.yaml", "gpu-quick.yaml"),
                                     ("default.yaml", "gpu-rl.yaml")])
def test_rl_configs_checkpoint_and_keep_their_generation_size(configs):
    config = _merged(*configs)
    for stage in ("rl_general", "rl_hgemm"):
        grpo = config[stage]["grpo"]
        assert grpo["gradient_checkpointing"] is True, stage
        # micro-batches split one generation (TRL's steps_per_generation defaults to the accumulation
        # steps): one generation and one optimiser step a step, whatever the split
        generation = GENERATION.get((configs[-1], stage), 32)
        assert grpo["per_device_train_batch_size"] * grpo["gradient_accumulation_steps"] == generation, stage
        assert generation % grpo["num_generations"] == 0, stage

"""Model FLOPs per token and utilisation, shared by the pretrain stage's metrics and the benchmark.

FLOPs follow the usual dense-transformer count: 6 per parameter per token for forward and backward
(embedding lookups excluded, the output projection included), plus the attention scores and values,
12 * layers * hidden * context per token. Utilisation divides achieved model FLOP/s by the device's
dense bf16 peak, whatever precision the run used, so runs in different precisions compare on one scale.
"""

from __future__ import annotations

import torch

# Dense (no sparsity) bf16 tensor-core peaks from the vendor data sheets, in FLOP/s.
BF16_PEAK_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,  # SXM; the PCIe part is lower, but this project runs on SXM H100/H200
    "A100": 312e12,
}


def peak_flops(device_name: str | None = None) -> float | None:
    """The bf16 peak of the current (or named) GPU, or None where unknown (CPUs included)."""
    if device_name is None:
        if not torch.cuda.is_available():
            return None
        device_name = torch.cuda.get_device_name()
    for key, value in BF16_PEAK_FLOPS.items():
        if key in device_name:
            return value
    return None


def model_flops_per_token(model: torch.nn.Module, context: int) -> float:
    """Training FLOPs per token for a decoder LM with the given mean attention context length."""
    config = model.config
    embed = model.get_input_embeddings().weight
    unique = {id(p): p for p in model.parameters()}
    params = sum(p.numel() for p in unique.values())
    # The input embedding is a lookup, not a matmul; with tied weights the same tensor is also the
    # output projection, which is a matmul, so it stays counted.
    if not getattr(config, "tie_word_embeddings", False):
        params -= embed.numel()
    attention = 12 * config.num_hidden_layers * config.hidden_size * context
    return 6 * params + attention


def mfu(tokens_per_second: float, flops_per_token: float, peak: float | None) -> float | None:
    return None if not peak else tokens_per_second * flops_per_token / peak

"""Sampling speed of the pretraining-sized model: milliseconds per generated token step, and where they go.

RL steps are dominated by generation (a gpu-quick GRPO step of 32 completions x ~1000 tokens took
~55 s, i.e. ~55 ms a token step, for a ~90M model that trains at 265k tokens/s). This measures
`model.generate` as the stages call it (left-padded batch, sampling, KV cache) under a few settings,
and profiles one, so the slow part is named rather than guessed.

    python -m benchmarks.generation_speed [--batch 32] [--prompt 400] [--new 256] [--only TEXT] [--no-profile]
                                          [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import yaml
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[1]


def build(dtype: torch.dtype, attn: str, tiny: bool) -> LlamaForCausalLM:
    m = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())["pretrain"]["model"]
    sizes = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2) if tiny else {k: m[k] for k in (
                     "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")}
    cfg = LlamaConfig(vocab_size=16384, max_position_embeddings=m["max_position_embeddings"], tie_word_embeddings=True,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation=attn, **sizes)
    return LlamaForCausalLM(cfg).to(dtype)


def time_generate(model, batch: int, prompt: int, new: int, device: str, **kw) -> float:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 16384, (batch, prompt), generator=gen)
    mask = torch.ones_like(ids)
    for i in range(batch):  # left padding of varying width, as the stages batch prompts
        pad = (i * 37) % (prompt // 4)
        ids[i, :pad], mask[i, :pad] = 0, 0
    ids, mask = ids.to(device), mask.to(device)
    args = dict(input_ids=ids, attention_mask=mask, do_sample=True, temperature=0.8, top_p=0.95, pad_token_id=0,
                eos_token_id=[2], **kw)
    with torch.no_grad():
        model.generate(**args, max_new_tokens=8, min_new_tokens=8)  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(**args, max_new_tokens=new, min_new_tokens=new)
        if device == "cuda":
            torch.cuda.synchronize()
    assert out.shape[1] == prompt + new
    return (time.perf_counter() - start) / new * 1e3


def time_generate_batch(model, batch: int, prompt: int, new: int, device: str) -> float:
    """The same requests through transformers' continuous batching (`generate_batch`, paged KV cache),
    which TRL's GRPO can use for its sampling (`use_transformers_continuous_batching`)."""
    from transformers import GenerationConfig

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 16384, (batch, prompt), generator=gen)
    requests = [ids[i, (i * 37) % (prompt // 4):].tolist() for i in range(batch)]  # the same unpadded prompts
    config = GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=True, temperature=0.8, top_p=0.95,
                              pad_token_id=0, eos_token_id=[2])
    with torch.no_grad():
        model.generate_batch(requests[:2], generation_config=GenerationConfig(
            max_new_tokens=8, do_sample=True, pad_token_id=0, eos_token_id=[2]))  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate_batch(requests, generation_config=config)
        if device == "cuda":
            torch.cuda.synchronize()
    lengths = [len(o.generated_tokens) for o in out.values()]
    assert len(lengths) == batch and min(lengths) == new, lengths
    return (time.perf_counter() - start) / new * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=400)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None,
                    help="time only the settings whose label contains this text (e.g. 'eager')")
    ap.add_argument("--no-profile", action="store_true", help="skip the profiled run")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tiny = device == "cpu"  # on a CPU this checks the script, not the figure
    settings = [("fp32", torch.float32, "sdpa", {}), ("bf16", torch.bfloat16, "sdpa", {}),
                # the GRPO policy keeps fp32 master weights and eager attention (training.grpo.load_policy)
                ("fp32 eager attention", torch.float32, "eager", {}),
                ("fp32 eager, static cache", torch.float32, "eager", {"cache_implementation": "static"}),
                ("bf16 eager attention", torch.bfloat16, "eager", {}),
                ("bf16 static cache", torch.bfloat16, "sdpa", {"cache_implementation": "static"}),
                # RL steps are mostly sampling; a static cache takes the per-step cache growth away
                ("bf16 eager, static cache", torch.bfloat16, "eager", {"cache_implementation": "static"}),
                ("bf16 continuous batching", torch.bfloat16, "sdpa", {"batch_api": True})]
    if args.only:
        settings = [row for row in settings if args.only in row[0]]
    rows = []
    for label, dtype, attn, kw in settings:
        model = build(dtype, attn, tiny).to(device).eval()
        try:
            if kw.pop("batch_api", False):
                ms = time_generate_batch(model, args.batch, args.prompt, args.new, device)
            else:
                ms = time_generate(model, args.batch, args.prompt, args.new, device, **kw)
            rows.append({"setting": label, "ms_per_token_step": ms, "tokens_per_s": args.batch * 1e3 / ms})
        except Exception as e:  # noqa: BLE001 - a setting this transformers version refuses is a result too
            rows.append({"setting": label, "error": f"{type(e).__name__}: {e}"[:300]})
        print(rows[-1], flush=True)

    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
              "batch": args.batch, "prompt": args.prompt, "new_tokens": args.new, "model": "tiny" if tiny else "default.yaml pretrain.model",
              "rows": rows}
    if not args.no_profile:
        # Where the time goes in the bf16, sdpa, dynamic-cache setting (the slow one).
        model = build(torch.bfloat16, "sdpa", tiny).to(device).eval()
        activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device == "cuda" else [])
        with torch.profiler.profile(activities=activities) as prof:
            time_generate(model, args.batch, args.prompt, 64, device)
        sort = "cuda_time_total" if device == "cuda" else "cpu_time_total"
        result["profile_self_cpu"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        result["profile_device"] = prof.key_averages().table(sort_by=sort, row_limit=15)
        print(result["profile_self_cpu"])
        print(result["profile_device"])
    out = args.out or (os.path.join(os.environ["OUT"], "generation_speed.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(json.dumps(result, indent=1))
    for r in rows:
        print(f"{r['setting']:24s} " + (f"{r['ms_per_token_step']:7.2f} ms/step {r['tokens_per_s']:9.0f} tok/s" if "error" not in r else r["error"]))


if __name__ == "__main__":
    main()

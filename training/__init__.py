"""Training library: model/tokenizer loading (model), prompt format (prompts), corpus packing (data),
candidate sampling checks (sampling), FLOPs/MFU (throughput), pretraining (pretrain), GRPO (grpo,
rewards, probe, kerneldb), rl_hgemm's held-out split and contrastive prompts (heldout, context), the
two RL stages (rl_general, rl_hgemm) and best-of-k sampling (best_of_k). The stage CLIs in stages/ are
thin wrappers over these modules."""

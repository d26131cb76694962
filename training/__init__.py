"""Training library: model/tokenizer loading (model), prompt format (prompts), corpus packing (data),
candidate sampling checks (sampling), FLOPs/MFU (throughput), and the pretraining stage (pretrain).
The stage CLIs in stages/ are thin wrappers over these modules."""

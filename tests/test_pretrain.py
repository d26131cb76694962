"""Pretraining stage: model building and loading, packing, resume and reruns, DeepSpeed configs, sampling
checks, and an end-to-end CPU run on a tiny synthetic corpus with a tokenizer trained here."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch
from datasets import Dataset, DatasetDict

from hgemm.problem import Problem
from configured import DEFAULT, section
from configured import settings as from_config
from stages.common import build_dataclass, load_stage_config
from training.data import (
    load_corpus,
    pack_blocks,
    packed_splits,
    source_token_shares,
    tokenize_documents,
    weight_sources,
)
from training.model import (
    ModelSettings,
    build_model,
    count_parameters,
    encode_prompt,
    llama_config,
    load_tokenizer,
    stop_token_ids,
    tokenizer_for,
)
from training.pretrain import PretrainConfig
from training.prompts import END_TOKEN, SPECIAL_TOKENS, format_training_example
from training.sampling import check_candidates

ROOT = Path(__file__).parents[1]
NAIVE = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()
SMOKE = ROOT / "configs" / "smoke.yaml"


def _documents(n: int) -> list[str]:
    # Kernel-like text plus framed seed examples, so the tokenizer and model see the real format.
    docs = []
    for i in range(n):
        if i % 3 == 0:
            docs.append(format_training_example(Problem(64 * (1 + i % 4), 128, 64), NAIVE))
        else:
            docs.append(f"__global__ void k{i}(float* x, int n) {{ int i = blockIdx.x * {i % 7 + 1}; if (i < n) x[i] *= 2.0f; }}")
    return docs


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    """A byte-level BPE saved as PreTrainedTokenizerFast, with the special tokens stages.tokenizer gives."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    roles = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=list(roles.values()) + list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train_from_iterator(_documents(30), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, additional_special_tokens=list(SPECIAL_TOKENS),
                                  clean_up_tokenization_spaces=False, **roles)
    path = tmp_path_factory.mktemp("tokenizer")
    tok.save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "dataset"
    DatasetDict({
        "train": Dataset.from_dict({"text": _documents(60)}),
        "validation": Dataset.from_dict({"text": _documents(12)[::-1]}),
    }).save_to_disk(str(path))
    return str(path.parent)  # the corpus stage's folder; the DatasetDict lies in its dataset/


def _tiny_settings(**kw) -> ModelSettings:
    return from_config(ModelSettings, "pretrain", "model", **{
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 256, **kw})


# ---- model -----------------------------------------------------------------------------------------

def test_tokenizer_has_single_special_tokens(tokenizer_dir):
    tok = load_tokenizer(tokenizer_dir)
    for t in SPECIAL_TOKENS:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1
    ids = encode_prompt(tok, "<|problem|>\nx\n<|candidate|>\n")
    assert ids[0] == tok.bos_token_id
    assert tok.convert_tokens_to_ids(END_TOKEN) in stop_token_ids(tok)


def test_smoke_config_builds_about_1m_params(tokenizer_dir):
    cfg = from_config(PretrainConfig, "pretrain", smoke=True)
    tok = load_tokenizer(tokenizer_dir)
    model = build_model(cfg.model, tok)
    assert model.config.vocab_size == len(tok)
    assert model.config.hidden_size == cfg.model.hidden_size
    # With the project tokenizer's default 16k vocabulary instead of this test's 400 tokens:
    n = count_parameters(model) + (16384 - len(tok)) * cfg.model.hidden_size
    assert 0.5e6 < n < 2e6


def test_gpu_config_size_and_context(tokenizer_dir):
    cfg = from_config(PretrainConfig, "pretrain")
    tok = load_tokenizer(tokenizer_dir)
    config = llama_config(cfg.model, tok)
    config.vocab_size = 16384  # the tokenizer stage's default
    from transformers import LlamaForCausalLM

    with torch.device("meta"):  # sizes only, no memory
        n = count_parameters(LlamaForCausalLM(config))
    assert 50e6 <= n <= 150e6
    assert cfg.model.max_position_embeddings >= 2048 and cfg.train.block_size >= 2048


def test_whole_experiment_config_and_unknown_keys(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("pretrain:\n  model: {hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2}\n"
                    "  train: {max_steps: 3}\nrl_general: {}\n")
    cfg = build_dataclass(PretrainConfig, load_stage_config([DEFAULT, path], "pretrain", ["train.learning_rate=0.01"]),
                          "pretrain")
    assert cfg.train.max_steps == 3 and cfg.train.learning_rate == 0.01 and cfg.model.hidden_size == 64
    with pytest.raises(ValueError, match="warmup_stepz"):
        build_dataclass(PretrainConfig, section("pretrain") | {"train": {"warmup_stepz": 1}}, "pretrain")
    with pytest.raises(ValueError, match=r"pretrain: missing setting\(s\) \['sample', 'launch'\]"):
        build_dataclass(PretrainConfig, load_stage_config(path, "pretrain"), "pretrain")
    with pytest.raises(ValueError, match="name_or_path"):
        from_config(ModelSettings, "pretrain", "model", init="pretrained")


def test_load_pretrained_from_local_folder(tokenizer_dir, tmp_path):
    tok = load_tokenizer(tokenizer_dir)
    # A "pretrained" model whose vocabulary lacks our last tokens, as an existing code model would.
    from transformers import LlamaForCausalLM

    config = llama_config(_tiny_settings(), tok)
    config.vocab_size = len(tok) - 3
    saved = LlamaForCausalLM(config)
    saved.save_pretrained(str(tmp_path / "base"))
    tok.save_pretrained(str(tmp_path / "base"))

    settings = from_config(ModelSettings, "pretrain", "model", init="pretrained", name_or_path=str(tmp_path / "base"),
                           use_model_tokenizer=True)
    tok2 = tokenizer_for(settings, None)
    loaded = build_model(settings, tok2)
    assert loaded.get_input_embeddings().num_embeddings == len(tok2)
    assert torch.equal(loaded.get_input_embeddings().weight[: len(tok) - 3], saved.get_input_embeddings().weight)
    assert loaded.config.eos_token_id == tok2.eos_token_id
    out = loaded(torch.tensor([encode_prompt(tok2, "<|problem|>hi")])).logits
    assert out.shape[-1] == len(tok2)


# ---- data ------------------------------------------------------------------------------------------

def test_packing_fills_blocks_with_bos_eos(tokenizer_dir, corpus_dir):
    tok = load_tokenizer(tokenizer_dir)
    corpus = load_corpus(corpus_dir)
    docs = tokenize_documents(corpus["train"], tok)
    total = sum(len(x) for x in docs["input_ids"])
    assert docs[0]["input_ids"][0] == tok.bos_token_id and docs[0]["input_ids"][-1] == tok.eos_token_id
    packed = pack_blocks(docs, 64)
    assert len(packed) == total // 64
    assert all(len(r) == 64 for r in packed["input_ids"])
    assert packed["input_ids"] == packed["labels"]
    flat = [t for doc in docs["input_ids"] for t in doc]
    assert packed[1]["input_ids"] == flat[64:128]

    train, val = packed_splits(corpus, tok, 64, max_eval_blocks=2)
    assert len(val) == 2 and len(train) == len(packed)
    with pytest.raises(ValueError, match="no full block"):
        packed_splits(corpus, tok, 10**6)


def test_source_weights_repeat_documents_and_leave_validation_alone(tokenizer_dir):
    from datasets import Dataset, DatasetDict

    rows = [{"text": f"doc {i} " + "x" * (10 + i), "source": src} for i, src in
            enumerate(["package"] * 6 + ["reference"] * 3 + ["task"] * 2)]
    ds = Dataset.from_list(rows)
    weighted = weight_sources(ds, {"reference": 3, "task": 0, "package": 1.5}, seed=1)
    texts = weighted["text"]
    assert all(texts.count(r["text"]) == 3 for r in rows if r["source"] == "reference")
    assert not any(r["source"] == "task" for r in weighted)  # weight 0 drops the source
    package_copies = [texts.count(r["text"]) for r in rows if r["source"] == "package"]
    assert sorted(set(package_copies)) == [1, 2]  # 1.5: one copy each, a second for about half
    assert texts != sorted(texts, key=[r["text"] for r in rows].index)  # shuffled, not grouped
    assert weight_sources(ds, {"reference": 3, "package": 1.5}, seed=1)["text"] == \
        weight_sources(ds, {"reference": 3, "package": 1.5}, seed=1)["text"]  # seeded
    assert weight_sources(ds, None) is ds
    with pytest.raises(ValueError, match="unknown source"):
        weight_sources(ds, {"refrence": 2})
    assert len(weight_sources(ds, {"family_variant": 2})) == len(ds)  # absent from this corpus: a warning
    with pytest.raises(ValueError, match=">= 0"):
        weight_sources(ds, {"reference": -1})

    tok = load_tokenizer(tokenizer_dir)
    shares: dict = {}
    corpus = DatasetDict({"train": ds, "validation": ds})
    train, val = packed_splits(corpus, tok, 8, source_weights={"reference": 10}, shares=shares)
    assert shares["train"]["reference"] > shares["validation"]["reference"] * 2
    assert abs(sum(shares["train"].values()) - 1) < 1e-3
    assert shares["validation"] == source_token_shares(tokenize_documents(ds, tok))
    assert len(train) > len(val)


# ---- sampling checks --------------------------------------------------------------------------------

def test_check_candidates_without_compiling():
    p = Problem(128, 128, 128)
    checks, summary = check_candidates([(p, NAIVE + END_TOKEN), (p, "garbage")], compile=False)
    assert [c.parsed for c in checks] == [True, False] and [c.compiled for c in checks] == [None, None]
    assert summary["parse_rate"] == 0.5
    assert summary["compile_rate"] is None and summary["compile"] == "disabled in config"
    assert "no kernel was run" in summary["checked"]


def test_check_candidates_when_the_harness_cannot_start(monkeypatch):
    # verification that cannot run is reported, never raised: the stage keeps going
    import training.sampling as sampling

    def broken(*a, **kw):
        raise ImportError("No module named 'pycuda'")

    compile_candidate = lambda candidate, layout="NN", arch=None: types.SimpleNamespace(ok=True, error=None)  # noqa: E731
    monkeypatch.setattr(sampling, "compile_candidate", compile_candidate)
    monkeypatch.setattr(sampling, "_verify_compiled", broken)
    checks, summary = check_candidates([(Problem(64, 64, 64), NAIVE)], verify=True)
    assert checks[0].compiled and checks[0].verdict is None and summary["pass_rate"] is None
    assert "the harness failed to start: ImportError" in summary["checked"]


def test_check_candidates_with_compiler(monkeypatch):
    import training.sampling as sampling

    calls = []

    def compile_candidate(candidate, layout="NN", arch=None):
        calls.append(layout)
        if layout == "TN":
            raise RuntimeError("nvcc exploded")
        return types.SimpleNamespace(ok=True, error=None)

    monkeypatch.setattr(sampling, "compile_candidate", compile_candidate)
    samples = [(Problem(64, 64, 64), NAIVE), (Problem(64, 64, 64, 1, "TN"), NAIVE), (Problem(64, 64, 64), "x")]
    checks, summary = check_candidates(samples)
    assert sorted(calls) == ["NN", "TN"]
    assert [c.compiled for c in checks] == [True, False, None]
    assert summary["compile_rate"] == pytest.approx(1 / 3) and summary["compile_rate_of_parsed"] == 0.5
    assert "nvcc exploded" in next(iter(summary["compile_errors"]))


# ---- DeepSpeed configs ------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_configs(stage):
    cfg = json.loads((ROOT / "configs" / "deepspeed" / f"zero{stage}.json").read_text())
    assert cfg["zero_optimization"]["stage"] == stage
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping", "train_batch_size"):
        assert cfg[key] == "auto", key  # filled from TrainingArguments, so YAML stays the one source
    assert cfg["bf16"]["enabled"] == "auto"
    # No optimizer block: the Trainer's own torch AdamW is handed to DeepSpeed, so nothing is JIT-built
    # (DeepSpeed's FusedAdam compiles a CUDA extension at start-up, minutes on a fresh machine).
    assert "optimizer" not in cfg and cfg["zero_allow_untested_optimizer"] is True
    if stage == 3:
        # Without it save_model would write empty shards instead of the gathered weights.
        assert cfg["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


# ---- the stage end to end -----------------------------------------------------------------------------

def test_cli_help_on_every_flag():
    from stages.pretrain import build_parser

    parser = build_parser()
    assert all(a.help for a in parser._actions)
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["--help"])
    assert e.value.code == 0


# The stage at a size that trains in seconds on the CPU (the synthetic corpus has no source column).
TINY = ["model.hidden_size=32", "model.intermediate_size=64", "model.max_position_embeddings=128",
        "train.block_size=64", "train.max_steps=4", "train.save_steps=2", "train.eval_steps=2",
        "train.logging_steps=1", "train.per_device_train_batch_size=4", "train.max_eval_blocks=4",
        "sample.num_samples=2", "sample.max_new_tokens=12", "sample.compile=false", "train.source_weights={}"]


def _stage_args(tmp_path, tokenizer_dir, corpus_dir, *overrides) -> list[str]:
    args = ["--config", str(DEFAULT), "--config", str(SMOKE), "--corpus", corpus_dir, "--tokenizer", tokenizer_dir,
            "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    return args + [a for item in TINY + list(overrides) for a in ("--set", item)]


def _stage(tmp_path, tokenizer_dir, corpus_dir, *overrides):
    from stages.pretrain import main

    main(_stage_args(tmp_path, tokenizer_dir, corpus_dir, *overrides))
    return json.loads((tmp_path / "out" / "metrics.json").read_text())


@pytest.mark.slow  # two processes training a tiny model on the CPU: ~30 s on 2 cores
def test_the_stage_trains_data_parallel_under_torchrun(tmp_path, tokenizer_dir, corpus_dir):
    """pretrain.launch.processes: 2 as rules/pretrain.smk runs it, here on the CPU (gloo): one model, the
    metrics of rank 0 only, and the global batch twice the per-process one."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "stages.pretrain",
           *_stage_args(tmp_path, tokenizer_dir, corpus_dir, "train.dataloader_num_workers=0")]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["environment"]["world_size"] == 2, metrics["environment"]
    assert metrics["train"]["tokens_per_step"] == 64 * 4 * 2  # block x per-process batch x processes
    assert (tmp_path / "out" / "model.safetensors").is_file()


def _crash_after_training(monkeypatch):
    """The stage dies once training is over (in the sampling check), as a killed job would: its
    checkpoints stay in the work dir, nothing is published."""
    import training.pretrain

    def crash(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(training.pretrain, "sample_and_check", crash)


def test_stage_end_to_end_resume_and_rerun(tmp_path, tokenizer_dir, corpus_dir, monkeypatch, capsys):
    out, work = tmp_path / "out", tmp_path / "work"
    # A zero time budget stops after one step with a checkpoint; the run dies before publishing.
    with monkeypatch.context() as m:
        _crash_after_training(m)
        with pytest.raises(RuntimeError, match="killed"):
            _stage(tmp_path, tokenizer_dir, corpus_dir, "train.max_train_seconds=0")
    assert (work / "checkpoint-1").is_dir() and not out.exists()
    assert list((work / "tensorboard").rglob("events.out.tfevents*"))

    # Rerun (the time budget is not part of the resume key): continues from checkpoint-1 to the end.
    capsys.readouterr()
    m = _stage(tmp_path, tokenizer_dir, corpus_dir)
    assert "resuming from checkpoint-1, same config and inputs" in capsys.readouterr().out
    assert m["train"]["resumed_from"].endswith("checkpoint-1")
    assert m["train"]["global_step"] == 4 and m["train"]["steps_this_run"] == 3
    assert m["eval_loss"] > 0 and m["perplexity"] == pytest.approx(2.718281828 ** m["eval_loss"], rel=1e-6)
    assert m["tokens_per_second"] > 0
    assert m["sampling"]["samples"] == 2 and 0 <= m["parse_rate"] <= 1
    assert "no kernel was run" in m["sampling"]["checked"]
    assert (out / "config.json").exists() and (out / "tokenizer.json").exists()
    assert len((out / "samples.jsonl").read_text().splitlines()) == 2
    curve = json.loads((out / "loss_curve.json").read_text())
    assert [r["step"] for r in curve if "loss" in r] == [1, 2, 3, 4]  # one curve across both runs
    assert any("eval_loss" in row for row in curve)
    from training.model import load_causal_lm

    final = load_causal_lm(str(out))
    assert final.config.vocab_size == len(load_tokenizer(str(out))) and final.config.use_cache

    # Rerun of a finished run (a neutral setting changed, or none): trained again from the start, the
    # old state moved aside.
    m = _stage(tmp_path, tokenizer_dir, corpus_dir, "train.logging_steps=2")
    assert "a finished run" in capsys.readouterr().out
    assert m["train"]["resumed_from"] is None and m["train"]["steps_this_run"] == 4
    assert (tmp_path / "work.previous" / "checkpoint-4").is_dir()

    # A run that reached max_steps and died after: the rerun takes that checkpoint's weights, and says so.
    with monkeypatch.context() as mp:
        _crash_after_training(mp)
        with pytest.raises(RuntimeError):
            _stage(tmp_path, tokenizer_dir, corpus_dir, "train.logging_steps=2")
    assert json.loads((out / "metrics.json").read_text())["train"]["steps_this_run"] == 4  # left whole
    m = _stage(tmp_path, tokenizer_dir, corpus_dir, "train.logging_steps=2")
    assert "already reached max_steps (4)" in capsys.readouterr().out
    assert m["train"]["resumed_from"].endswith("checkpoint-4") and m["train"]["steps_this_run"] == 0

    # A changed training setting: a fresh run on its own, no refusal.
    m = _stage(tmp_path, tokenizer_dir, corpus_dir, "train.learning_rate=0.123")
    assert "settings.train changed" in capsys.readouterr().out
    assert m["train"]["resumed_from"] is None and m["train"]["global_step"] == 4
    assert m["config"]["train"]["learning_rate"] == 0.123


@pytest.mark.slow
def test_throughput_benchmark_runs_on_cpu(tmp_path, tokenizer_dir, monkeypatch):
    from benchmarks.pretrain_throughput import main

    monkeypatch.setenv("OUT", str(tmp_path))
    result = main(["--config", str(DEFAULT), "--config", str(SMOKE), "--tokenizer", tokenizer_dir, "--steps", "2", "--warmup", "1",
                   "--set", "train.block_size=64", "--set", "train.per_device_train_batch_size=2"])
    saved = json.loads((tmp_path / "pretrain_throughput.json").read_text())
    assert set(saved["arms"]) == {"hf_defaults", "configured"}
    assert saved["arms"]["configured"]["real_token_fraction"] == 1.0
    assert result["configured_over_hf_defaults"] > 0


# ---- several ranks agree when the time budget ends ---------------------------------------------------

def _budget_rank(rank: int, port: int, out) -> None:
    import torch.distributed as dist

    from training.pretrain import _agreed

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        # rank 0's clock says stop, rank 1's does not (and the other way round): rank 0 decides for both
        out.put((rank, _agreed(rank == 0, "cpu"), _agreed(rank == 1, "cpu")))
    finally:
        dist.destroy_process_group()


def test_time_budget_decision_is_rank_zeros():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_budget_rank, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert results == [(0, True, False), (1, True, False)]


@pytest.mark.parametrize("evaluate_on_stop", [False, True])
def test_the_time_budget_stops_after_a_step_saves_and_evaluates_if_asked(evaluate_on_stop):
    from transformers import TrainerControl

    from training.pretrain import TrainClock

    clock = TrainClock(0.0, evaluate_on_stop=evaluate_on_stop)
    args, state, control = types.SimpleNamespace(device="cpu"), types.SimpleNamespace(), TrainerControl()
    clock.on_train_begin(args, state, control)
    clock.on_step_begin(args, state, control)
    clock.on_step_end(args, state, control)
    assert control.should_training_stop and control.should_save and clock.stopped_by_budget
    assert control.should_evaluate is evaluate_on_stop and clock.steps == 1

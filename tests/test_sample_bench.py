"""stages.sample and stages.bench on CPU: held-out parsing, best-of-k choice, the stage CLIs with a tiny
model and a tiny library, and bench's per-shape contenders (model best + library kernel)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from hgemm.problem import Problem
from kernels_corpus.verbatim import CorpusKernels
from configured import DEFAULT, settings
from conftest import named_kernel
from stages import bench as bench_stage
from stages import sample as sample_stage
from training.best_of_k import SampleSettings, best_index, evaluation_problems, run_sample
from training.heldout import heldout_problems
from training.prompts import END_TOKEN

ROOT = Path(__file__).parents[1]
NAIVE = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()
SMOKE_GRID = str(ROOT / "configs" / "grids" / "smoke.yaml")


def test_heldout_problems_reads_rl_hgemm_format(tmp_path):
    # the layout stages.rl_hgemm writes: a rule with bare keys, and full problem dicts with their class
    path = tmp_path / "heldout.json"
    path.write_text(json.dumps({
        "rule": {"keys": ["b1_m1024_n1024_k1024_NN"], "fraction": 0.2, "salt": "s"},
        "heldout": [{"M": 1024, "N": 1024, "K": 1024, "batch": 1, "layout": "NN", "shape_class": "aligned",
                     "key": "b1_m1024_n1024_k1024_NN"},
                    {"M": 3, "N": 5, "K": 7, "batch": 2, "layout": "TN", "shape_class": "edge"}],
        "train": [{"M": 1, "N": 1, "K": 1, "batch": 1, "layout": "NN", "key": "b1_m1_n1_k1_NN"}],
    }))
    got = {p.key: p.shape_class for p in heldout_problems(path)}
    assert got == {"b1_m1024_n1024_k1024_NN": "aligned", "b2_m3_n5_k7_TN": "edge"}  # never a training shape
    path.write_text(json.dumps(["b1_m8_n8_k8_TN", {"M": 2, "N": 3, "K": 4}]))  # a bare list works too
    assert [p.key for p in heldout_problems(path)] == ["b1_m8_n8_k8_TN", "b1_m2_n3_k4_NN"]
    assert heldout_problems(tmp_path / "missing.json") == []


def test_evaluation_problems_flag_and_add_heldout():
    held = [Problem(256, 256, 256, shape_class="aligned"), Problem(3, 5, 7, 2, "TN", "edge")]
    probs = evaluation_problems(settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["aligned"]), held)
    assert [(p.key, h) for p, h in probs] == [("b1_m256_n256_k256_NN", True), ("b1_m1024_n1024_k1024_NN", False),
                                              ("b2_m3_n5_k7_TN", True)]


def test_best_index_prefers_fastest_verified_then_first_compiled():
    assert best_index([{"status": "wrong"}, {"status": "ok", "speedup_vs_best": 0.5},
                       {"status": "ok", "speedup_vs_best": 1.2}, {"status": "compiled"}]) == 2
    assert best_index([{"status": "parse_error"}, {"status": "compiled"}, {"status": "compiled"}]) == 1
    assert best_index([{"status": "parse_error"}, {"status": "compile_error"}]) is None


def _fake_generate(prompts, k):
    # one unparseable completion, then a real kernel followed by the stop token and junk
    return [["no kernel here", NAIVE + END_TOKEN + " junk"][:k] for _ in prompts]


def test_run_sample_on_cpu_keeps_a_compiled_best(tmp_path):
    held = tmp_path / "heldout.json"
    held.write_text(json.dumps({"heldout": [{"M": 96, "N": 96, "K": 96, "batch": 1, "layout": "TN"}]}))
    corpus = CorpusKernels([("reference/naive.cu", NAIVE)])  # the fake model recites it
    m = run_sample(settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["batched_small"], k=2), _fake_generate,
                   str(held), str(tmp_path / "sample"), verbatim=corpus)
    assert m["timed"] is False and "no GPU" in m["note"] and m["correct_rate"] is None
    assert m["verbatim_corpus_samples"] == 2 and m["verbatim_corpus_best"] == 2
    assert m["shapes"] == 2 and m["heldout_shapes"] == 1 and m["samples"] == 4
    assert set(m["phase_s"]) == {"prompts", "generate", "judge", "records"} and min(m["phase_s"].values()) >= 0
    assert abs(sum(m["phase_s"].values()) - m["wall_s"]) < 1e-6
    # judging on a CPU is compiling: the judge's only phase here, inside the stage's judging
    assert set(m["judge_phase_s"]) == {"compile"} and 0 < m["judge_phase_s"]["compile"] <= m["phase_s"]["judge"]
    assert m["statuses"] == {"parse_error": 2, "compiled": 2} and m["shapes_with_best"] == 2
    records = [json.loads(line) for line in (tmp_path / "sample" / "samples.jsonl").read_text().splitlines()]
    assert [r["best"] for r in records] == [False, True, False, True]
    assert [r["verbatim"] for r in records] == [None, "reference/naive.cu"] * 2
    assert sum(r["heldout"] for r in records) == 2
    best = json.loads((tmp_path / "sample" / "best.json").read_text())
    assert set(best) == {"b16_m64_n64_k64_NN", "b1_m96_n96_k96_TN"}
    text = (tmp_path / "sample" / "best" / "b1_m96_n96_k96_TN.cu").read_text()
    assert "/*@launch" in text and "junk" not in text


def test_run_sample_rejects_a_family_render_whose_spec_does_not_fit_its_template(tmp_path):
    # as the RL rewards do: a wgmma render with another variant's block would launch wrong or hang on the
    # GPU; it is a parse_error naming the field, and the stage keeps the kernel that compiles
    from kernels_corpus.families import wgmma

    render = wgmma.render(wgmma.variants()[0])
    misfit = render.replace("block: 384", "block: 256")
    assert misfit != render

    def generate(prompts, k):
        return [[misfit, NAIVE][:k] for _ in prompts]

    m = run_sample(settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["batched_small"], k=2), generate,
                   None, str(tmp_path / "sample"))
    records = [json.loads(line) for line in (tmp_path / "sample" / "samples.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["parse_error", "compiled"]
    assert records[0]["error"].startswith("launch spec does not fit wgmma_gemm<") and "block" in records[0]["error"]
    assert m["judge_phase_s"]["compile"] > 0 and [r["best"] for r in records] == [False, True]


def test_run_sample_says_how_varied_the_samples_are_and_what_they_copy(tmp_path):
    from training.prompts import format_problem_prompt

    held = tmp_path / "heldout.json"
    held.write_text(json.dumps({"heldout": [{"M": 96, "N": 96, "K": 96, "batch": 1, "layout": "TN"}]}))
    # the fake model writes the prompt's last kernel out again (and one junk completion); the prompt shows
    # it with another comment, which makes it no other kernel
    shown = "// measured elsewhere: 0.9x\n" + NAIVE.strip()
    prompter = lambda p: (format_problem_prompt(p, context=[("weaker()", 0.3), (shown, 0.9)]), 2)  # noqa: E731
    m = run_sample(settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["batched_small"], k=2), _fake_generate,
                   str(held), str(tmp_path / "sample"), prompter=prompter)
    assert m["distinct_kernels_per_shape"] == m["heldout_distinct_kernels_per_shape"] == 2
    assert m["samples_copying_an_example"] == 2 and m["heldout_samples_copying_an_example"] == 1
    assert m["shapes_sampling_the_last_example"] == 2 and m["heldout_shapes_sampling_the_last_example"] == 1
    records = [json.loads(line) for line in (tmp_path / "sample" / "samples.jsonl").read_text().splitlines()]
    assert [(r["copies_example"], r["examples_shown"]) for r in records] == [(0, 2), (2, 2)] * 2
    # bare prompts show nothing to copy
    bare = run_sample(settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["batched_small"], k=2),
                      _fake_generate, str(held), str(tmp_path / "bare"))
    assert bare["samples_copying_an_example"] == 0 and bare["shapes_sampling_the_last_example"] == 0


def _library(tmp_path) -> Path:
    """A kernel library as stages.tune leaves it on a CPU: an empty table and the fallback kernel."""
    lib = tmp_path / "tune"
    (lib / "kernels").mkdir(parents=True)
    (lib / "kernels" / "naive_fallback.cu").write_text(NAIVE)
    (lib / "table.json").write_text(json.dumps({"arch": "sm_90a", "gpu_run": False, "entries": {},
                                                "fallback": "naive_fallback"}))
    return lib


def test_the_bench_stages_library_contender_is_what_the_op_serves(tmp_path, monkeypatch):
    """With a first-call search width in the library's table, the library contender of a shape without an
    entry is the search's pick where a GPU runs the search (faked here), and the rule's pick without one."""
    from hgemm import ops
    from hgemm.autotune import Search
    from hgemm.library import Choice, Library, set_autotune
    from stages import bench as bench_stage

    lib_dir = _library(tmp_path)
    unseen, other = Problem(96, 96, 96), Problem(300, 200, 100)
    rule = Library(lib_dir).lookup(unseen)
    assert bench_stage.library_choice(lib_dir, [unseen])[0](unseen)[0] == rule.name  # no search width
    set_autotune(lib_dir, 4)
    choose, searched = bench_stage.library_choice(lib_dir, [unseen])
    assert choose(unseen)[0] == rule.name and searched == {}  # no GPU
    found = Choice("searched", rule.candidate, "autotune fallback")
    calls = []

    def fake_search(library, problems, top):
        calls.append((library.autotune, top, [p.key for p in problems]))
        return {unseen.key: Search(found, [rule, found], {rule.name: 2.0, "searched": 1.0})}

    monkeypatch.setattr(bench_stage, "visible_gpus", lambda: [0])
    monkeypatch.setattr(ops, "autotuned_choices", fake_search)
    choose, searched = bench_stage.library_choice(lib_dir, [unseen, other])
    assert calls == [(4, 4, [unseen.key, other.key])]
    assert choose(unseen)[0::2] == ("searched", "autotune fallback")
    assert choose(other)[0] == rule.name
    assert rule.name in searched  # the kernels the search timed on the searched shape, the rule's pick first


def test_sample_and_bench_stage_clis_on_cpu(tmp_path, tiny_model_dir):
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({
        "sample": {"grid": SMOKE_GRID, "classes": ["aligned"], "k": 2, "max_new_tokens": 8, "batch_size": 4,
                   "context": False},
        "bench": {"grid": SMOKE_GRID, "classes": ["aligned"], "reps": 1},
    }))
    held = tmp_path / "heldout.json"
    held.write_text(json.dumps({"heldout": [{"M": 96, "N": 96, "K": 96}]}))
    sample_out = tmp_path / "sample"
    assert sample_stage.main(["--config", str(DEFAULT), "--config", str(config), "--model", tiny_model_dir, "--heldout", str(held),
                              "--out", str(sample_out)]) == 0
    m = json.loads((sample_out / "metrics.json").read_text())
    assert m["samples"] == 6 and m["timed"] is False  # 2 grid shapes + 1 held out, k = 2
    assert len((sample_out / "samples.jsonl").read_text().splitlines()) == 6

    # A random model writes no kernel; give one shape a model kernel so bench has both contenders.
    (sample_out / "best").mkdir(exist_ok=True)
    (sample_out / "best" / "b1_m256_n256_k256_NN.cu").write_text(NAIVE)
    (sample_out / "best.json").write_text(json.dumps({"b1_m256_n256_k256_NN": {
        "problem": Problem(256, 256, 256, shape_class="aligned").to_dict(), "heldout": False,
        "file": "best/b1_m256_n256_k256_NN.cu"}}))
    bench_out, library = tmp_path / "bench", _library(tmp_path)
    assert bench_stage.main(["--config", str(DEFAULT), "--config", str(config), "--samples", str(sample_out), "--library",
                             str(library), "--out", str(bench_out), "--no-progress"]) == 0
    results = json.loads((bench_out / "results.json").read_text())
    assert results["gpu_run"] is False
    by_key = {Problem.from_dict(pr["problem"]).key: pr for pr in results["problems"]}
    # the held-out 96^3 is benched although the model kept no kernel for it (evaluated.json)
    assert set(by_key) == {"b1_m256_n256_k256_NN", "b1_m1024_n1024_k1024_NN", "b1_m96_n96_k96_NN"}
    assert [k for k, pr in by_key.items() if pr["heldout"]] == ["b1_m96_n96_k96_NN"]
    assert set(by_key["b1_m96_n96_k96_NN"]["candidates"]) == {"library"}
    # each shape runs only its own contenders: the model kernel of 256^3 is not run on 1024^3
    assert set(by_key["b1_m256_n256_k256_NN"]["candidates"]) == {"model", "library"}
    assert set(by_key["b1_m1024_n1024_k1024_NN"]["candidates"]) == {"library"}
    assert by_key["b1_m1024_n1024_k1024_NN"]["kernels"]["library_choice"] == "fallback"
    # the model's 256^3 kernel is the library's fallback text: the library's own kernel, never a win over it
    assert by_key["b1_m256_n256_k256_NN"]["kernels"]["model_is_library_kernel"] is True
    assert by_key["b1_m256_n256_k256_NN"]["kernels"]["model_library_kernel"] == "naive_fallback"
    assert all(c["status"] == "compiled" for pr in results["problems"] for c in pr["candidates"].values())
    assert "Nothing was timed" in (bench_out / "summary.md").read_text()
    metrics = json.loads((bench_out / "metrics.json").read_text())
    assert metrics["timed"] is False and metrics["shapes_with_model_kernel"] == 1
    assert metrics["statuses"] == {"model": {"compiled": 1}, "library": {"compiled": 3}}
    assert metrics["heldout_shapes"] == 1 and metrics["heldout_share_model_beats_library"] is None  # not timed
    assert metrics["heldout_after_vs_before"] is None

    # --before: the pretrained model's best kernels on the same prompts are a third contender
    before = tmp_path / "sample_pretrained"
    (before / "best").mkdir(parents=True)
    for key, p in (("b1_m96_n96_k96_NN", Problem(96, 96, 96)), ("b1_m256_n256_k256_NN", Problem(256, 256, 256))):
        (before / "best" / f"{key}.cu").write_text(NAIVE)
    (before / "best.json").write_text(json.dumps({key: {"problem": Problem.from_key(key).to_dict(), "file": f"best/{key}.cu"}
                                                  for key in ("b1_m96_n96_k96_NN", "b1_m256_n256_k256_NN")}))
    assert bench_stage.main(["--config", str(DEFAULT), "--config", str(config), "--samples", str(sample_out),
                             "--before", str(before), "--library", str(library), "--out", str(bench_out),
                             "--no-progress"]) == 0
    by_key = {Problem.from_dict(pr["problem"]).key: pr
              for pr in json.loads((bench_out / "results.json").read_text())["problems"]}
    # compared on the held-out shapes only
    assert set(by_key["b1_m96_n96_k96_NN"]["candidates"]) == {"before", "library"}
    assert set(by_key["b1_m256_n256_k256_NN"]["candidates"]) == {"model", "library"}
    assert by_key["b1_m96_n96_k96_NN"]["kernels"]["before"] == str(before / "best" / "b1_m96_n96_k96_NN.cu")
    metrics = json.loads((bench_out / "metrics.json").read_text())
    assert metrics["statuses"]["before"] == {"compiled": 1} and metrics["heldout_after_vs_before_shapes"] == 0


def test_bench_without_library_table_still_benches_the_model(tmp_path):
    samples = tmp_path / "sample"
    (samples / "best").mkdir(parents=True)
    (samples / "best" / "b1_m64_n64_k64_NN.cu").write_text(NAIVE)
    (samples / "best.json").write_text(json.dumps({"b1_m64_n64_k64_NN": {
        "problem": Problem(64, 64, 64).to_dict(), "file": "best/b1_m64_n64_k64_NN.cu"}}))
    bench = settings(bench_stage.BenchSettings, "bench", grid=SMOKE_GRID, classes=["batched_small"], reps=1)
    results = bench_stage.run(bench, str(samples), str(tmp_path / "no_tune"), progress=False)
    by_key = {Problem.from_dict(pr["problem"]).key: list(pr["candidates"]) for pr in results["problems"]}
    assert by_key == {"b16_m64_n64_k64_NN": [], "b1_m64_n64_k64_NN": ["model"]}


def test_sample_prompts_carry_rl_hgemm_context_never_heldout(tmp_path, tiny_model_dir):
    """context: true. A held-out shape's prompt shows kernels of the nearest training shapes, from the
    kernel database rl_hgemm left beside its model and from the library's reference kernels, with
    their speedups; nothing recorded for a held-out shape is ever shown."""
    from training.best_of_k import context_prompter
    from training.kerneldb import KernelDB

    train, held = Problem(256, 256, 512, shape_class="aligned"), Problem(256, 256, 256, shape_class="aligned")
    model = tmp_path / "rl_hgemm"
    shutil.copytree(tiny_model_dir, model)
    db = KernelDB(model / "kernels.sqlite")
    db.record("rl_hgemm", 3, train.key, "aligned", named_kernel("kernel_from_training"), {"status": "ok", "speedup_vs_best": 0.7},
              0.0, "policy")
    db.record("rl_hgemm", 3, held.key, "aligned", named_kernel("kernel_of_heldout"), {"status": "ok", "speedup_vs_best": 0.9},
              0.0, "policy")  # cannot happen in rl_hgemm; the prompt must not show it even so
    db.close()
    lib = tmp_path / "tune"
    (lib / "kernels").mkdir(parents=True)
    (lib / "kernels" / "reference_short.cu").write_text(named_kernel("kernel_reference"))
    (lib / "kernels" / "wgmma_long.cu").write_text(named_kernel("kernel_library_winner"))
    (lib / "table.json").write_text(json.dumps({"fallback": "reference_short", "entries": {
        key: {"kernel": "wgmma_long", "speedup_vs_best": 0.95, "references": {"reference_short": 0.4}}
        for key in (train.key, held.key)}}))
    with_context = settings(SampleSettings, "sample", grid=SMOKE_GRID, k=1, context=True, max_prompt_length=1000,
                            context_examples=3)
    prompt, kept = context_prompter(with_context, str(model), str(lib), [held])(held)
    assert kept == 3 and "kernel_from_training()" in prompt and "0.70x" in prompt and "kernel_reference()" in prompt
    assert "kernel_of_heldout" not in prompt and "0.90x" not in prompt
    # run_sample records the context per candidate and says which prompts it used
    bare = settings(SampleSettings, "sample", grid=SMOKE_GRID, classes=["batched_small"], k=1)
    m = run_sample(bare, _fake_generate, None, str(tmp_path / "sample"), prompter=lambda p: ("prompt", 2))
    records = [json.loads(line) for line in (tmp_path / "sample" / "samples.jsonl").read_text().splitlines()]
    assert m["prompts"] == "contrastive context" and m["prompts_with_context"] == 1
    assert [r["context_examples"] for r in records] == [2]


def test_generation_with_a_static_cache_matches_the_dynamic_one(tiny_model_dir):
    """cache_implementation="static" (the setting GRPO and the sampling stage pass on) generates the same
    tokens as the dynamic cache for the same seed, on left-padded prompts of two lengths."""
    import torch

    from training.model import SAMPLING_ATTENTION, load_causal_lm, load_tokenizer
    from training.sampling import generate_completions

    tok = load_tokenizer(tiny_model_dir)
    model = load_causal_lm(tiny_model_dir, tok, SAMPLING_ATTENTION)
    prompts = ["__global__ void k(", "int x = 1;\n__global__ void kernel(const float* a"]
    runs = []
    for cache in (None, "static"):
        torch.manual_seed(0)
        runs.append(generate_completions(model, tok, prompts, 2, 12, temperature=1.0, top_p=1.0, batch_size=4,
                                         cache_implementation=cache))
    assert runs[0] == runs[1] and all(len(per) == 2 for per in runs[0])


@pytest.mark.gpu
def test_the_sample_generator_hands_the_gpu_memory_of_generation_back(tiny_model_dir):
    """The sample stage judges after generating, its harness workers being other processes on the same
    GPU: the memory generation cached (a batch's KV cache and attention scores) goes back to the driver,
    only the weights stay reserved."""
    import torch

    from training.best_of_k import model_generator

    generate = model_generator(tiny_model_dir, settings(SampleSettings, "sample", grid=SMOKE_GRID, batch_size=64,
                                                        max_new_tokens=32, cache_implementation=None))
    # prompts of ~1k tokens: eager attention's prefill scores are hundreds of MiB at this batch
    prompts = [NAIVE * 3] * 16
    generate(prompts[:1], 1)  # what stays allocated once generation has run (cuBLAS's workspace) is not cache
    held = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    completions = generate(prompts, 4)
    assert len(completions) == 16 and all(len(per) == 4 for per in completions)
    generated = torch.cuda.max_memory_reserved() - held
    assert generated > 64 << 20, f"generation reserved only {generated >> 20} MiB: nothing to hand back"
    assert torch.cuda.memory_reserved() - held < 4 << 20


def test_library_stage_gives_the_model_the_shapes_it_won_by_the_margin(tmp_path):
    from hgemm.library import Library, set_autotune
    from stages import library as library_stage

    tune = _library(tmp_path)
    samples = tmp_path / "sample"
    (samples / "best").mkdir(parents=True)
    won, close, lost = Problem(256, 256, 256), Problem(512, 512, 512), Problem(64, 64, 64)
    for p in (won, close, lost):
        (samples / "best" / f"{p.key}.cu").write_text(NAIVE.replace("hgemm_naive", f"model_{p.M}"))
    (samples / "best.json").write_text(json.dumps({p.key: {"problem": p.to_dict(), "file": f"best/{p.key}.cu"}
                                                   for p in (won, close, lost)}))

    def pr(p, model_us, library_us):
        return {"problem": p.to_dict(), "best_baseline": "cublas", "kernels": {"library": "generic"}, "candidates": {
            "model": {"status": "ok", "time_us": model_us, "speedup_vs_best": 5 / model_us},
            "library": {"status": "ok", "time_us": library_us, "speedup_vs_best": 5 / library_us}}}

    bench = tmp_path / "bench"
    bench.mkdir()
    # the library's own kernel written out again, timed faster by noise: not the model's to own
    copied = Problem(128, 128, 128)
    own = pr(copied, 5.0, 10.0)
    own["kernels"]["model_is_library_kernel"] = True
    (bench / "results.json").write_text(json.dumps({"gpu_run": True, "problems": [
        pr(won, 5.0, 10.0), pr(close, 9.9, 10.0), pr(lost, 12.0, 10.0), own]}))
    out = tmp_path / "library"
    argv = ["--config", str(DEFAULT), "--bench", str(bench), "--samples", str(samples), "--tune", str(tune), "--out", str(out)]
    assert library_stage.main(argv) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model_owned"] == [won.key] and metrics["geomean_model_vs_replaced_kernel"] == pytest.approx(2.0)
    lib = Library(out)
    choice = lib.lookup(won)
    assert (choice.name, choice.how) == (f"model_{won.key}", "exact") and "model_256" in choice.candidate.source
    # 1% faster is within the margin: not handed over; and the model's kernel serves its own shape only
    assert lib.lookup(close).name == "naive_fallback" and lib.lookup(Problem(255, 256, 256)).name == "naive_fallback"
    assert f"| {won.key} | 5.0 | 2.000 | generic |" in (out / "owned.md").read_text()
    # a CPU bench run timed nothing: the library is the tuned one
    (bench / "results.json").write_text(json.dumps({"gpu_run": False, "problems": []}))
    assert library_stage.main(argv) == 0
    assert json.loads((out / "metrics.json").read_text())["model_owned"] == []
    assert "owns no shape" in (out / "owned.md").read_text()
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["naive_fallback.cu"]
    # the tune stage's first-call search width is the final library's, the one hgemm.matmul reads
    assert Library(out).autotune == 0
    set_autotune(tune, 8)
    assert library_stage.main(argv) == 0
    assert Library(out).autotune == 8

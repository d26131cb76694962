"""The RL stages: hold-out and bucketing, contrastive prompts, config validity, and both stages end to end
on CPU (a tiny Llama and tokenizer made here, two GRPO steps each, compile-only rewards)."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from pathlib import Path

import pytest
import yaml

from configured import config_files, section, settings
from conftest import named_kernel
from hgemm.library import dispatch_library, measured_kernels
from hgemm.problem import Problem, load_grid
from stages.common import build_dataclass, load_stage_config, run_training
from training import rl_general, rl_hgemm
from training.context import ContrastivePrompts, DrawnPrompts
from training.heldout import ShapeSettings, bucket_of, buckets, reward_shapes, split_grid
from training.kerneldb import KernelDB
from training.model import load_tokenizer
from training.prompts import format_problem_prompt

ROOT = Path(__file__).parents[1]
NAIVE = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()


# ---- shapes ----------------------------------------------------------------------------------------

def test_heldout_is_deterministic_and_never_trained():
    s = settings(ShapeSettings, "rl_hgemm", "shapes", grid="configs/grids/default.yaml",
                 heldout_keys=["b1_m4096_n4096_k4096_NN"], heldout_fraction=0.2, heldout_grid=None, classes=None,
                 max_gflop=None)
    train, heldout = split_grid(s, ROOT)
    again_train, again_heldout = split_grid(s, ROOT)
    assert [p.key for p in train] == [p.key for p in again_train] and heldout == again_heldout
    held = {p.key for p in heldout}
    assert "b1_m4096_n4096_k4096_NN" in held and not held & {p.key for p in train}
    grid = load_grid(ROOT / "configs/grids/default.yaml")
    assert len(train) + len(heldout) == len(grid)
    assert 0.1 < len(heldout) / len(grid) < 0.35  # the hash fraction, roughly
    groups = buckets(train)
    for p in train:  # the shapes a completion is judged on: its bucket's, never held out
        shapes = reward_shapes(p, groups[bucket_of(p)], 3)
        assert shapes[0] == p and 1 <= len(shapes) <= 3
        assert all(bucket_of(q) == bucket_of(p) and q.key not in held for q in shapes)
    # filters shrink training, never the held-out set
    small_train, small_held = split_grid(dataclasses.replace(s, max_gflop=10, classes=["aligned", "batched_small"]),
                                         ROOT)
    assert small_held == heldout and all(p.flops <= 10e9 and p.shape_class in ("aligned", "batched_small")
                                         for p in small_train)
    with pytest.raises(ValueError, match="not in the grid"):
        split_grid(dataclasses.replace(s, heldout_keys=["b1_m3_n3_k3_NN"]), ROOT)


def test_a_heldout_grid_is_held_out_whole_and_recorded(tmp_path):
    from training.heldout import heldout_problems, heldout_record

    s = settings(ShapeSettings, "rl_hgemm", "shapes", grid="configs/grids/sample_fit.yaml", heldout_keys=[],
                 heldout_fraction=0.0, heldout_grid="configs/grids/heldout.yaml", classes=None, max_gflop=None)
    train, heldout = split_grid(s, ROOT)
    grid_keys = {p.key for p in load_grid(ROOT / "configs/grids/heldout.yaml")}
    assert {p.key for p in heldout} == grid_keys and len(train) == len(load_grid(ROOT / "configs/grids/sample_fit.yaml"))
    # a grid shape that is also in the held-out grid is held out, not trained
    overlap = train[0]
    one = {"groups": [{"class": overlap.shape_class, "layouts": [overlap.layout],
                       "shapes": [[overlap.M, overlap.N, overlap.K, overlap.batch]]}]}
    with pytest.raises(ValueError, match="leaves no training shape"):
        split_grid(dataclasses.replace(s, grid=one, heldout_grid="configs/grids/sample_fit.yaml"), ROOT)
    record = heldout_record(s, train, heldout)
    assert record["rule"]["grid"] == "configs/grids/heldout.yaml"
    (tmp_path / "heldout.json").write_text(json.dumps(record))  # what the sample stage reads back
    assert {p.key for p in heldout_problems(tmp_path / "heldout.json")} == grid_keys


def test_buckets_split_by_class_layout_and_size():
    a, b = Problem(1024, 1024, 1024, 1, "NN", "aligned"), Problem(1100, 1024, 1000, 1, "NN", "aligned")
    assert bucket_of(a) == bucket_of(b) == "aligned/NN/s10"
    assert bucket_of(Problem(1024, 1024, 1024, 1, "TN", "aligned")) != bucket_of(a)
    assert bucket_of(Problem(4096, 4096, 4096, 1, "NN", "aligned")) != bucket_of(a)
    assert bucket_of(Problem(1024, 1024, 1024, 1, "NN", "llm")) != bucket_of(a)


# ---- contrastive prompts ---------------------------------------------------------------------------

def _library(folder: Path, entries: dict[str, tuple[str, str, float]],
             references: dict[str, tuple[str, float]] | None = None) -> Path:
    """A tune output folder: per key its winner (name, text, speedup), and the same reference kernels
    (name -> (text, speedup)) timed on every key, as hgemm.tune writes them."""
    (folder / "kernels").mkdir(parents=True)
    table = {"entries": {}, "fallback": "naive"}
    for name, (text, _) in (references or {}).items():
        (folder / "kernels" / f"{name}.cu").write_text(text)
    for key, (name, text, speedup) in entries.items():
        (folder / "kernels" / f"{name}.cu").write_text(text)
        table["entries"][key] = {"kernel": name, "time_us": 10.0, "speedup_vs_best": speedup,
                                 "references": {n: s for n, (_, s) in (references or {}).items()}}
    (folder / "table.json").write_text(json.dumps(table))
    return folder


def test_library_may_be_missing_or_partial(tmp_path):
    assert measured_kernels(None) == {} and measured_kernels(tmp_path / "absent") == {}
    lib = _library(tmp_path / "lib", {"b1_m64_n64_k64_NN": ("a", "A()", 0.9)},
                   references={"reference_slow": ("S()", 0.1), "reference_fast": ("F()", 0.4)})
    json.loads((lib / "table.json").read_text())
    table = json.loads((lib / "table.json").read_text())
    table["entries"]["b1_m8_n8_k8_NN"] = {"kernel": "missing_file", "speedup_vs_best": 1.0}
    table["entries"]["b1_m64_n64_k64_NN"]["references"]["reference_gone"] = 2.0  # its file is missing
    table["entries"]["b1_m64_n64_k64_NN"]["references"]["reference_untimed"] = None
    (lib / "table.json").write_text(json.dumps(table))
    assert measured_kernels(lib) == {"b1_m64_n64_k64_NN": [("A()", 0.9), ("F()", 0.4), ("S()", 0.1)]}


def test_contrastive_prompt_shows_best_and_weaker_kernels_never_heldout(tmp_path, tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    target, held = Problem(256, 256, 256, 1, "NN", "aligned"), Problem(512, 512, 512, 1, "NN", "aligned")
    db = KernelDB(tmp_path / "k.sqlite")
    for text, speedup, shape in [(named_kernel("kernel_best_db"), 1.8, Problem(256, 256, 512)),
                                 (named_kernel("kernel_mid_db"), 0.9, target), (named_kernel("kernel_poor_db"), 0.2, target),
                                 # faster still, but it cannot run an NN problem: never a model to copy
                                 (named_kernel("kernel_tn_only", "TN"), 5.0, Problem(256, 256, 512, 1, "TN")),
                                 ("kernel_unparsable()", 4.0, target)]:
        db.record("rl_hgemm", 0, shape.key, "aligned", text, {"status": "ok", "speedup_vs_best": speedup}, 0.0, "policy")
    library = measured_kernels(_library(tmp_path / "lib", {
        Problem(128, 256, 256).key: ("lib_near", named_kernel("kernel_library"), 0.6),
        held.key: ("lib_held", named_kernel("kernel_heldout_secret"), 9.0),
    }))

    def contrastive(library, max_prompt_length):
        return ContrastivePrompts(db, library, {held.key}, tok, max_prompt_length, examples=3, nearby_shapes=4,
                                  prompt_arch="sm_90a")

    prompts = contrastive(library, 4096)
    text, kept = prompts.prompt(target)
    assert kept == 3 and text.startswith(tok.bos_token)
    assert "kernel_heldout_secret" not in text and "9.00x" not in text
    assert "kernel_tn_only" not in text and "kernel_unparsable" not in text
    assert "kernel_best_db()" in text and "1.80x" in text
    # weakest first, best last (right before the answer)
    shown = [name for name in ("kernel_poor_db", "kernel_library", "kernel_mid_db", "kernel_best_db") if name in text]
    assert [text.index(n) for n in shown] == sorted(text.index(n) for n in shown) and shown[-1] == "kernel_best_db"
    # a tight budget drops the weakest examples first and keeps the best
    bare = len(tok(prompts.prefix + format_problem_prompt(target))["input_ids"])
    tight = contrastive(library, bare + 40)
    text, kept = tight.prompt(target)
    assert kept < 3 and (kept == 0 or "kernel_best_db()" in text)
    # a kernel too long for the prompt on its own is passed over, not allowed to crowd out the rest:
    # the contrast is chosen among the kernels that can be shown
    long_lib = measured_kernels(_library(tmp_path / "lib_long", {
        Problem(128, 256, 256).key: ("lib_long", named_kernel("kernel_too_long", tail=" x = x + 1;" * 400), 3.0)}))
    roomy = contrastive(long_lib, bare + 800)
    text, kept = roomy.prompt(target)
    assert "kernel_too_long" not in text and kept == 3 and "kernel_best_db()" in text
    # ... while a short reference kernel the tune timed on that shape is shown, with its speedup
    with_ref = measured_kernels(_library(tmp_path / "lib_ref", {
        Problem(128, 256, 256).key: ("lib_long", named_kernel("kernel_too_long", tail=" x = x + 1;" * 400), 3.0)},
        references={"reference_short": (named_kernel("kernel_reference_short"), 2.5)}))
    text, kept = contrastive(with_ref, bare + 800).prompt(target)
    assert "kernel_too_long" not in text and kept == 3 and "2.50x" in text
    assert text.rindex("kernel_reference_short()") > text.rindex("kernel_best_db()")  # the best, last
    # the datasets transform fills the prompt column from the problem column
    from training.rewards import problems_to_json

    row = DrawnPrompts(prompts, share=1.0, seed=0)({"problems": [problems_to_json([target])], "problem_key": [target.key]})
    assert row["prompt"][0] == prompts.prompt(target)[0] and row["problem_key"] == [target.key]
    # context.share: that share of drawn prompts gets context, the rest go bare (context_examples 0)
    batch = {"problems": [problems_to_json([target])] * 200, "problem_key": [target.key] * 200}
    bare_text = prompts.prefix + format_problem_prompt(target)
    for share in (0.0, 0.5, 1.0):
        drawn = DrawnPrompts(prompts, share, seed=0)(batch)
        with_context = sum(n > 0 for n in drawn["context_examples"])
        assert all((n > 0) == (t != bare_text) for t, n in zip(drawn["prompt"], drawn["context_examples"]))
        assert {0.0: with_context == 0, 0.5: 70 < with_context < 130, 1.0: with_context == 200}[share], share
    db.close()


def test_a_shape_nothing_measured_ends_on_the_library_choice(tmp_path, tiny_model_dir):
    tok = load_tokenizer(tiny_model_dir)
    unseen, seen = Problem(192, 256, 256, 1, "NN", "aligned"), Problem(256, 256, 512, 1, "NN", "aligned")
    held, held2 = Problem(4096, 4096, 4096, 1, "NN", "aligned"), Problem(4096, 4096, 4160, 1, "NN", "aligned")
    db = KernelDB(tmp_path / "k.sqlite")
    db.record("rl_hgemm", 0, seen.key, "aligned", named_kernel("kernel_best_db"), {"status": "ok", "speedup_vs_best": 1.8},
              0.0, "policy")
    folder = _library(tmp_path / "lib", {Problem(128, 256, 256).key: ("near", named_kernel("kernel_near_lib"), 0.6),
                                         Problem(2048, 2048, 2048).key: ("far", named_kernel("kernel_far_lib"), 1.5),
                                         held.key: ("held", named_kernel("kernel_heldout_secret"), 9.0)})
    dispatch = dispatch_library(folder)
    assert dispatch.lookup(unseen).name == "near"   # the table has no rule: nearest
    prompts = ContrastivePrompts(db, measured_kernels(folder), {held.key, held2.key}, tok, 4096, examples=3,
                                 nearby_shapes=4, prompt_arch="sm_90a", dispatch=dispatch)
    # unseen: the library's kernel for the shape is the last example, with the speedup it measured where
    # it was tuned, after the faster kernel of a neighbour
    text, kept = prompts.prompt(unseen)
    assert kept == 3 and text.rindex("kernel_near_lib()") > text.rindex("kernel_best_db()") and "0.60x" in text
    # without a dispatch library the neighbour's fastest kernel comes last
    plain = ContrastivePrompts(db, measured_kernels(folder), {held.key}, tok, 4096, examples=3, nearby_shapes=4,
                               prompt_arch="sm_90a")
    text = plain.prompt(unseen)[0]
    assert text.rindex("kernel_best_db()") > text.rindex("kernel_near_lib()")
    # a shape with its own measurement ends on its fastest kernel, dispatch or not
    text = prompts.prompt(seen)[0]
    assert text.rstrip().endswith("<|candidate|>") and text.rindex("kernel_best_db()") > text.rindex("kernel_near_lib()")
    # a held-out shape is never shown a held-out shape's tuned kernel (its own, or as another's choice or
    # neighbour), nor its speedup: its last example is the library's choice from the other shapes
    for problem in (held, held2):
        text = prompts.prompt(problem)[0]
        assert "kernel_heldout_secret" not in text and "9.00x" not in text
        assert text.rindex("kernel_far_lib()") > text.rindex("kernel_near_lib()")
    assert dispatch.lookup(held).name == "held"   # the library itself is left whole
    assert dispatch_library(None) is None and dispatch_library(tmp_path / "absent") is None
    db.close()


# ---- configs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("smoke", [False, True], ids=["default", "smoke"])
@pytest.mark.parametrize("stage", ["rl_general", "rl_hgemm"])
def test_configs_are_valid(stage, smoke):
    cls = rl_general.RLGeneralSettings if stage == "rl_general" else rl_hgemm.RLHgemmSettings
    s = settings(cls, stage, smoke=smoke)
    grpo = s.grpo
    # TRL needs whole prompt groups in a generation batch
    assert (grpo["per_device_train_batch_size"] * grpo["gradient_accumulation_steps"]) % grpo["num_generations"] == 0
    assert grpo["max_train_seconds"] is not None  # every run is capped in wall time
    if stage == "rl_general":
        assert rl_general.task_problems(s.tasks)
    else:
        train, heldout = split_grid(s.shapes, ROOT)
        assert train and heldout
    if not smoke:  # prompt and completion within the positions the pretrained model has
        positions = section("pretrain", "model")["max_position_embeddings"]
        assert grpo["bf16"] in ("auto", True) and grpo["max_prompt_length"] + grpo["max_completion_length"] <= positions


# ---- the grpo: section, handed to TRL whole ---------------------------------------------------------

@pytest.mark.parametrize("stage", ["rl_general", "rl_hgemm"])
def test_grpo_section_goes_to_trl_whole(tmp_path, stage):
    from trl import GRPOConfig

    from training.grpo import OWN_GRPO_KEYS, build_grpo_config

    grpo = section(stage, "grpo", smoke=True)
    args = build_grpo_config(grpo, str(tmp_path))
    assert isinstance(args, GRPOConfig) and args.output_dir == str(tmp_path)
    assert grpo["bf16"] is False and grpo["optim"] != "auto"  # the smoke values: nothing to resolve
    # TRL derives a null steps_per_generation from the accumulation steps
    resolved = {"steps_per_generation": grpo["steps_per_generation"] or grpo["gradient_accumulation_steps"]}
    for key, value in grpo.items():  # every TRL key of the section arrives as written
        if key not in OWN_GRPO_KEYS:
            assert getattr(args, key) == resolved.get(key, value), key
    # a setting the section does not name takes TRL's own default
    default = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert "repetition_penalty" not in grpo
    assert args.repetition_penalty == default["repetition_penalty"]


def test_grpo_section_keys_are_trl_settings_or_ours():
    import dataclasses

    from trl import GRPOConfig

    from training.grpo import OWN_GRPO_KEYS, STAGE_GRPO_KEYS

    trl_keys = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert not set(OWN_GRPO_KEYS) & trl_keys  # ours are not TRL's (logging_dir may be either: transformers 5.x)
    for stage in ("rl_general", "rl_hgemm"):
        keys = set(section(stage, "grpo"))
        assert keys - set(OWN_GRPO_KEYS) <= trl_keys - set(STAGE_GRPO_KEYS), keys - trl_keys


@pytest.mark.parametrize("change, message", [
    ({"max_stepz": 5}, "rl_hgemm.grpo: unknown key 'max_stepz': not a trl.GRPOConfig setting, nor one of ours "
                       "(max_prompt_length, max_train_seconds)"),
    ({"output_dir": "elsewhere"}, "rl_hgemm.grpo: 'output_dir' is set by the stage, not by the config"),
])
def test_a_bad_grpo_key_is_one_line_naming_it(tmp_path, change, message):
    from training.grpo import build_grpo_config, check_grpo_section

    grpo = section("rl_hgemm", "grpo") | change
    for call in (lambda: check_grpo_section(grpo, "rl_hgemm.grpo"), lambda: build_grpo_config(grpo, str(tmp_path))):
        with pytest.raises(ValueError) as e:
            call()
        assert message.removeprefix("rl_hgemm.") in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError) as e:  # as the stage builds its settings
        settings(rl_hgemm.RLHgemmSettings, "rl_hgemm", grpo=change)
    assert str(e.value) == message.replace("rl_hgemm.grpo", "grpo")
    # and through the stage CLI, one line naming the file and the key (the schema speaks first there)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"rl_hgemm": {"grpo": change}}))
    from stages.rl_hgemm import main

    with pytest.raises(SystemExit) as e:
        main(["--config", str(ROOT / "configs/default.yaml"), "--config", str(bad), "--model", str(tmp_path),
              "--work", str(tmp_path / "w"), "--out", str(tmp_path / "o")])
    assert isinstance(e.value.code, str) and "\n" not in e.value.code and repr(next(iter(change))) in e.value.code
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()


def test_a_missing_setting_is_named(tmp_path):
    partial = tmp_path / "partial.yaml"
    partial.write_text(yaml.safe_dump({"rl_hgemm": {k: v for k, v in section("rl_hgemm").items() if k != "probe"}}))
    from stages.rl_hgemm import main

    with pytest.raises(SystemExit) as e:
        main(["--config", str(partial), "--model", str(tmp_path), "--work", str(tmp_path / "w"),
              "--out", str(tmp_path / "o")])
    assert "rl_hgemm: missing setting(s) ['probe']" in e.value.code and "--config configs/default.yaml" in e.value.code


# ---- end to end on CPU ------------------------------------------------------------------------------

def _two_steps(cls, stage: str, *overrides: str):
    """The smoke settings of an RL stage, cut to two steps of short completions."""
    data = load_stage_config(config_files(smoke=True), stage, ["grpo.max_steps=2", "grpo.save_steps=2",
                                                               "grpo.max_completion_length=24", *overrides])
    return build_dataclass(cls, data, stage)


def test_task_prompts_show_the_seed_solution_where_it_fits(tiny_model_dir):
    from kernels_corpus.tasks import load_tasks
    from training.prompts import REFERENCE_INTRO
    from training.rl_general import TaskSettings, build_dataset, task_problems

    tok = load_tokenizer(tiny_model_dir)
    pairs = task_problems(settings(TaskSettings, "rl_general", "tasks", names=["vector_add_f32", "gemm_f16"],
                                   size_indices=[0]))
    solutions = {t.name: t.solution.strip() for t in load_tasks()}
    bare, _, _ = build_dataset(pairs, tok, 4096, 1, show_reference=False)
    shown, skipped, too_long = build_dataset(pairs, tok, 4096, 1, show_reference=True)
    assert not skipped and not too_long
    for row_bare, row in zip(bare, shown):
        assert REFERENCE_INTRO not in row_bare["prompt"] and solutions[row["task"]] not in row_bare["prompt"]
        assert REFERENCE_INTRO in row["prompt"] and solutions[row["task"]] in row["prompt"]
        assert row["prompt"].endswith("<|candidate|>\n")
    # a budget that fits the bare prompts but not the longer reference (gemm_f16's): that one goes bare
    lengths = {r["task"]: len(tok(r["prompt"])["input_ids"]) for r in shown}
    budget = max(len(tok(r["prompt"])["input_ids"]) for r in bare) + 1
    assert lengths["gemm_f16"] > budget
    tight, _, too_long = build_dataset(pairs, tok, budget, 1, show_reference=True)
    assert "gemm_f16" in too_long and REFERENCE_INTRO not in tight[1]["prompt"]


@pytest.mark.slow  # two training runs with nvcc-compiled rewards: ~7 s on 2 cores
def test_rl_general_end_to_end_and_resume(tmp_path, tiny_model_dir):
    s = _two_steps(rl_general.RLGeneralSettings, "rl_general", "tasks.names=[vector_add_f32, relu_f32]")
    out, work = tmp_path / "out", tmp_path / "work"

    def run() -> dict:
        return run_training(rl_general.GeneralRL(s, tiny_model_dir, str(work), str(out)), str(work), str(out))

    metrics = run()
    for f in ("config.json", "model.safetensors", "tokenizer.json", "kernels.sqlite", "curves.json", "metrics.json"):
        assert (out / f).exists(), f
    curves = json.loads((out / "curves.json").read_text())
    assert [r["step"] for r in curves] == [1, 2]
    assert {"reward", "compile_rate", "parse_rate"} <= set(curves[0])
    assert metrics["timed"] is False and "parse+compile only" in metrics["reward_scope"]
    assert metrics["evaluations"] == 2 * 8 and set(metrics["best_per_task"]) == {"vector_add_f32", "relu_f32"}
    assert metrics["phases"]["reward"]["first"] is not None
    # the probe: the same 2 task prompts, 2 completions each, from the start model and the trained one
    probe = metrics["probe"]
    assert probe["prompts"] == 2 and probe["before"]["completions"] == probe["after"]["completions"] == 4
    assert set(probe["before"]["per_problem"]) == set(probe["after"]["per_problem"])
    assert probe["before"]["model"] == tiny_model_dir and probe["after"]["model"] == str(out)
    assert probe["change"]["problems"] == 2 and "parse_rate" in probe["change"]
    assert metrics["phases_by_problem"]["steps_per_phase"] == 1
    conn = sqlite3.connect(out / "kernels.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM evaluations WHERE stage = 'rl_general'").fetchone()[0] == 16
    # running the stage again after it finished trains again (a rerun is never a reload of the checkpoint)
    again = run()
    assert again["train"]["steps_this_run"] == 2 and again["train"]["resumed_from"] is None


def test_rl_hgemm_end_to_end(tmp_path, tiny_model_dir):
    s = _two_steps(rl_hgemm.RLHgemmSettings, "rl_hgemm")
    # a library kernel for every training shape, short enough for the smoke prompt limit, so that every
    # probe problem has context to show
    train, _ = split_grid(s.shapes)
    library = _library(tmp_path / "lib", {p.key: ("tiny", named_kernel("tiny"), 0.05) for p in train})
    out, work = tmp_path / "out", tmp_path / "work"
    job = rl_hgemm.HgemmRL(s, tiny_model_dir, str(library), str(work), str(out))
    metrics = run_training(job, str(work), str(out))
    for f in ("model.safetensors", "tokenizer.json", "kernels.sqlite", "curves.json", "heldout.json", "metrics.json",
              "best_kernels/index.json"):
        assert (out / f).exists(), f
    held = {p["key"] for p in json.loads((out / "heldout.json").read_text())["heldout"]}
    assert "b1_m1024_n1024_k1024_NN" in held
    conn = sqlite3.connect(out / "kernels.sqlite")
    judged = {r[0] for r in conn.execute("SELECT DISTINCT problem_key FROM evaluations")}
    assert judged and not judged & held
    curves = json.loads((out / "curves.json").read_text())
    assert len(curves) == 2 and all("context_examples" in row for row in curves)  # contrastive context logged
    assert metrics["shapes"]["heldout"] == len(held) and metrics["context"]["library_entries"] == len(train)
    probed = set(metrics["probe"]["before"]["per_problem"])
    assert len(probed) == 2 and not probed & held and metrics["probe"]["after"]["completions"] == 4
    # the same problems with context (the library's naive kernel is near enough to show), both models
    in_context = metrics["probe_context"]
    assert set(in_context["before"]["per_problem"]) == probed and in_context["after"]["completions"] == 4
    assert in_context["before"]["model"] == tiny_model_dir and in_context["after"]["model"] == str(out)
    assert set(in_context["context_examples"]) == probed and min(in_context["context_examples"].values()) >= 1


def test_rl_hgemm_evaluates_held_out_shapes_during_training_and_records_them_apart(tmp_path, tiny_model_dir):
    s = _two_steps(rl_hgemm.RLHgemmSettings, "rl_hgemm", "shapes.heldout_eval=1", "grpo.eval_steps=1",
                   "grpo.eval_on_start=true", "grpo.num_generations_eval=2", "grpo.per_device_eval_batch_size=2",
                   "probe.prompts=0")
    out, work = tmp_path / "out", tmp_path / "work"
    metrics = run_training(rl_hgemm.HgemmRL(s, tiny_model_dir, None, str(work), str(out)), str(work), str(out))
    held = {p["key"] for p in json.loads((out / "heldout.json").read_text())["heldout"]}
    # before the first step and after each of the two: the held-out shape's rates, apart from training's
    curve = metrics["heldout_curve"]
    assert [row["step"] for row in curve] == [0, 1, 2], curve
    assert all(0 <= row["parse_rate"] <= 1 and "reward" in row for row in curve)
    conn = sqlite3.connect(out / "kernels.sqlite")
    by_stage = {}
    for stage, key in conn.execute("SELECT stage, problem_key FROM evaluations"):
        by_stage.setdefault(stage, set()).add(key)
    assert by_stage["rl_hgemm_heldout"] == held and not by_stage["rl_hgemm"] & held
    assert len(json.loads((out / "curves.json").read_text())) == 2  # the training curve has no held-out rows


def test_dataset_rows_hold_only_training_shapes_and_best_kernels_are_written(tmp_path):
    from training.rewards import problems_from_json
    from training.rl_hgemm import build_dataset, write_best_kernels

    s = settings(ShapeSettings, "rl_hgemm", "shapes", smoke=True, repeats=2)
    assert s.heldout_keys == ["b1_m1024_n1024_k1024_NN"]
    train, heldout = split_grid(s, ROOT)
    rows = build_dataset(train, s)
    assert len(rows) == 2 * len(train)
    judged = {p.key for r in rows for p in problems_from_json(r["problems"])}
    assert judged <= {p.key for p in train} and not judged & {p.key for p in heldout}

    db = KernelDB(tmp_path / "k.sqlite")
    a, b = train[0], train[1]
    db.record("rl_hgemm", 1, a.key, a.shape_class, "fast()", {"status": "ok", "speedup_vs_best": 1.5, "time_us": 2.0}, 0.4, "policy")
    db.record("rl_hgemm", 1, b.key, b.shape_class, "slow()", {"status": "ok", "speedup_vs_best": 0.5, "time_us": 9.0}, -0.7, "policy")
    library = {a.key: [("lib()", 1.2), ("ref()", 0.3)], b.key: [("lib()", 0.9)]}  # as measured_kernels gives it
    summary = write_best_kernels(db, train, library, tmp_path / "best")
    assert (tmp_path / "best" / f"{a.key}.cu").read_text() == "fast()"
    index = json.loads((tmp_path / "best" / "index.json").read_text())
    assert set(index) == {a.key, b.key} and index[a.key]["library_speedup_vs_best"] == 1.2
    assert summary["shapes_with_verified_kernel"] == 2 and summary["share_beating_library"] == 0.5
    db.close()


# ---- the before/after probe and the paired phase view ----------------------------------------------

def test_probe_spread_rates_and_comparison():
    from training.probe import compare_probes, spread, status_rates

    assert spread(list(range(10)), 3) == [0, 4, 9] and spread([1, 2], 5) == [1, 2] and spread([1], 0) == []

    def probe(per):
        return {"per_problem": per, **status_rates(per)}

    before = probe({"a": {"statuses": {"ok": 1, "parse_error": 3}, "best_speedup": 0.5},
                    "b": {"statuses": {"compile_error": 4}, "best_speedup": None},
                    "c": {"statuses": {"ok": 2, "wrong": 2}, "best_speedup": 0.2}})
    after = probe({"a": {"statuses": {"ok": 3, "parse_error": 1}, "best_speedup": 0.4},
                   "b": {"statuses": {"ok": 1, "compile_error": 3}, "best_speedup": 0.1},
                   "c": {"statuses": {"ok": 4}, "best_speedup": 0.8}})
    assert [before[k] for k in ("parse_rate", "compile_rate", "correct_rate")] == pytest.approx([9 / 12, 5 / 12, 3 / 12])
    change = compare_probes(before, after)
    assert change["correct_rate"] == pytest.approx({"before": 0.25, "after": 8 / 12})
    # a and c are verified both times: 0.5 -> 0.4 and 0.2 -> 0.8; b only after
    assert change["verified_both"] == 2 and change["verified_after_only"] == 1 and change["verified_before_only"] == 0
    assert change["best_speedup_rose"] == 1
    assert change["best_speedup_geomean"]["before"] == pytest.approx((0.5 * 0.2) ** 0.5)
    assert change["best_speedup_geomean"]["after"] == pytest.approx((0.4 * 0.8) ** 0.5)
    assert change["log_change_mean"] == pytest.approx((math.log(0.8) + math.log(4.0)) / 2)


def test_probe_generates_from_the_token_ids_grpo_sees(tiny_model_dir):
    from training.grpo import prompt_prefix
    from training.model import encode_prompt
    from training.probe import generation_prompt

    tok = load_tokenizer(tiny_model_dir)
    rl_prompt = prompt_prefix(tok) + "<|problem|>\nshape: M=64 N=64 K=64 batch=1\n<|candidate|>\n"
    assert encode_prompt(tok, generation_prompt(tok, rl_prompt)) == tok(rl_prompt)["input_ids"]
    assert encode_prompt(tok, rl_prompt) != tok(rl_prompt)["input_ids"]  # unstripped: a second bos


def test_compare_phases_by_problem_pairs_problems_across_phases():
    from training.grpo import compare_phases_by_problem

    def row(step, key, status, speedup=None):
        return {"step": step, "problem_key": key, "status": status, "speedup_vs_best": speedup}

    rows = [row(0, "a", "ok", 0.1), row(0, "a", "parse_error"), row(0, "b", "ok", 0.5),
            *[row(s, f"x{s}", "wrong") for s in range(1, 9)],
            row(9, "a", "ok", 0.4), row(9, "a", "ok", 0.2), row(9, "c", "ok", 2.0)]
    out = compare_phases_by_problem(rows)  # 10 steps: the first and last 2
    assert out["steps_per_phase"] == 2 and out["problems_paired"] == 1  # only a is in both phases
    assert out["correct_rate"] == {"first": 0.5, "last": 1.0} and out["parse_rate"] == {"first": 0.5, "last": 1.0}
    assert out["best_speedup_geomean"] == pytest.approx({"first": 0.1, "last": 0.4})
    assert compare_phases_by_problem([]) == {"problems_paired": 0}


def test_in_context_probe_asks_the_same_problems_both_ways(tiny_model_dir):
    """benchmarks/in_context_probe.py compares framings on one model: the pairs must differ only there."""
    from benchmarks.in_context_probe import hgemm_rows, task_rows
    from training.prompts import CANDIDATE_TOKEN, REFERENCE_INTRO

    tok = load_tokenizer(tiny_model_dir)
    general = section("rl_general")
    general["tasks"] |= {"names": ["vector_add_f32", "relu_f32", "softmax_rows_f32"], "size_indices": [0]}
    general["grpo"]["max_prompt_length"] = 4096
    tasks = task_rows(general, tok, 2)
    assert len(tasks["task_bare"]) == 2
    for bare, shown in zip(tasks["task_bare"], tasks["task_reference"]):
        assert bare["problem_key"] == shown["problem_key"] and bare["problems"] == shown["problems"]
        assert REFERENCE_INTRO not in bare["prompt"] and REFERENCE_INTRO in shown["prompt"]
        assert shown["prompt"].startswith(bare["prompt"].removesuffix(CANDIDATE_TOKEN + "\n"))
    hgemm = hgemm_rows(section("rl_hgemm"), tok, 4)
    assert len(hgemm["hgemm_bare"]) == 4
    references = [p.read_text().strip() for p in sorted(Path("kernels_corpus/reference").glob("*.cu"))]
    for bare, shown in zip(hgemm["hgemm_bare"], hgemm["hgemm_context"]):
        assert bare["problem_key"] == shown["problem_key"] and bare["problems"] == shown["problems"]
        assert "speed not measured" not in bare["prompt"]
        assert shown["prompt"].count("speed not measured") == 1
        assert sum(r in shown["prompt"] for r in references) == 1

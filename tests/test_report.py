"""The report: rendered from the committed H200 bench file (timed) and from a CPU-only bench (nothing
timed, said at the top), with RL curves and corpus stats, and with inputs missing."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path

import pytest

from configured import section
from hgemm.problem import Problem
from hgemm.report.tables import curve_keys, first_last_table, heldout_curve_table, shape_row
from stages import report as report_stage

ROOT = Path(__file__).parents[1]
FIXTURE = ROOT / "benchmarks" / "harness" / "honest_default.json"
CORPUS_STATS = ROOT / "benchmarks" / "corpus"
pytest.importorskip("matplotlib")


def _config(tmp_path) -> str:
    path = tmp_path / "report.yaml"
    path.write_text(json.dumps({"report": section("report") | {"title": "Test report", "max_heatmap_panels": 4}}))
    return str(path)


def _curves(folder: Path, n: int = 50) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"step": i, "reward_mean": -1 + i / n, "compile_rate": i / n, "correct_rate": i / (2 * n),
             "speedup_geomean": 0.5 + i / n, "loss": 1.0} for i in range(n)]
    (folder / "curves.json").write_text(json.dumps(rows))


def _cpu_results() -> dict:
    """The fixture as a CPU-only run would leave it: compiled, no baselines, no timings."""
    data = json.loads(FIXTURE.read_text())
    data["gpu_run"] = False
    data["env"]["gpus"] = []
    for pr in data["problems"]:
        pr["candidates"] = {name: {"status": "compiled"} for name in pr["candidates"]}
        for key in ("baselines", "best_baseline", "best_baseline_us"):
            pr.pop(key, None)
    return data


def test_report_from_h200_fixture(tmp_path):
    _curves(tmp_path / "rl_hgemm")
    times = tmp_path / "benchmarks"  # Snakemake's benchmark: files, one per stage
    times.mkdir()
    for stage, secs in (("corpus", 29.7), ("pretrain", 129.3)):
        (times / f"{stage}.tsv").write_text(f"s\th:m:s\tmax_rss\n{secs}\t0:00:30\t667.5\n")
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--bench", str(FIXTURE), "--corpus", str(CORPUS_STATS),
                              "--rl-hgemm", str(tmp_path / "rl_hgemm"), "--rl-general", str(tmp_path / "none"),
                              "--stage-times", str(times), "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "nothing was timed" not in html.lower() and "nothing was timed" not in md.lower()
    # the per-shape table: every baseline, the strongest, speedups; one row per problem
    for header in ("cublas µs", "cublaslt_tuned µs", "pad8_cublas µs", "strongest baseline", "speedup vs strongest",
                   "speedup vs cuBLAS", "TFLOP/s"):
        assert header in md, header
    assert md.count("| b1_m4096_n4096_k4096_TN |") == 1 and "| b256_m1024_n1024_k1024_NN |" in md
    # heatmaps, throughput/roofline, rl_hgemm curves: three figures, embedded in HTML, files for Markdown
    assert html.count("data:image/png;base64,") == 3
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "curves_rl_hgemm.png", "speedup_heatmaps.png", "tflops_vs_size.png"]
    assert "first 20%" in md and "reward_mean" in md and "correct_rate" in md
    assert "Not available: no rl_general curves.json" in md  # a missing input is a section, not a crash
    assert "carry no speed signal" not in md  # some completions were verified
    docs = json.loads((CORPUS_STATS / "stats.json").read_text())["total"]["docs"]
    assert f"{docs:,} documents" in md and "nvidia-cutlass" in md  # corpus statistics
    assert "NVIDIA H200" in md and "580.159.04" in md  # environment
    # the headline names whose kernels were measured: here the reference kernels, no model
    assert "No model-written kernel is among these results; the fastest verified candidate (mma_sync" in md
    assert "| corpus | 29.7 | 668 |" in md and "| pretrain | 129.3 |" in md and "their sum is 159 s" in md
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["timed"] is True and metrics["figures"] == 3


def test_report_cpu_only_says_nothing_was_timed_first(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "results.json").write_text(json.dumps(_cpu_results()))
    sample = tmp_path / "sample"  # how the model's kernels were drawn is said beside them
    sample.mkdir()
    (sample / "metrics.json").write_text(json.dumps({"k": 4, "shapes": 5, "prompts": "contrastive context",
                                                     "prompts_with_context": 3, "heldout_shapes": 2,
                                                     "distinct_kernels_per_shape": 2.5,
                                                     "heldout_distinct_kernels_per_shape": 1.5,
                                                     "samples_copying_an_example": 7,
                                                     "shapes_sampling_the_last_example": 4,
                                                     "heldout_shapes_sampling_the_last_example": 1}))
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--bench", str(bench), "--sample", str(sample),
                              "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert "best of 4 samples from contrastive context prompts (3 of 5 shapes had context examples)" in md
    assert ("A shape's 4 samples hold 2.5 distinct kernels on average (1.5 on held-out shapes); 7 samples write "
            "out a kernel their prompt shows, and on 4 of 5 shapes (1 of 2 held out)") in md
    # the banner comes before any section
    assert re.search(r"\A# Test report\n\n> \*\*Nothing was timed", md)
    assert html.index("class='banner'") < html.index("<h2>")
    assert "Nothing was timed" in html
    assert "| shape | class | mma_sync status | naive status | smem_tiled status |" in md
    assert md.count("| compiled | compiled | compiled |") == len(_cpu_results()["problems"])
    assert "data:image/png" not in html and not (out / "figures").exists()
    assert json.loads((out / "metrics.json").read_text())["timed"] is False


def test_report_with_nothing_at_all(tmp_path):
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Nothing was timed" in md and md.count("Not available") >= 4


def test_without_bench_results_the_banner_names_the_stages_that_timed_on_their_own(tmp_path):
    # a run that ended before its bench: the RL and sample figures were timed, the library comparison is missing
    for stage, timed in (("rl_hgemm", True), ("sample", True), ("rl_general", False)):
        (tmp_path / stage).mkdir()
        (tmp_path / stage / "metrics.json").write_text(json.dumps({"stage": stage, "timed": timed}))
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--rl-hgemm", str(tmp_path / "rl_hgemm"),
                              "--rl-general", str(tmp_path / "rl_general"), "--sample", str(tmp_path / "sample"),
                              "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Nothing was timed" not in md
    assert "No bench results" in md and "rl_hgemm, sample were timed" in md


def test_shape_row_prefers_the_model_and_compares_with_the_library():
    pr = copy.deepcopy(json.loads(FIXTURE.read_text())["problems"][5])  # 4096^3
    cands = pr["candidates"]
    pr["candidates"] = {"model": cands["mma_sync"], "library": cands["smem_tiled"], "other": cands["naive"]}
    row = shape_row(pr)
    assert row["kernel"] == "model" and row["time_us"] == cands["mma_sync"]["time_us"]
    assert row["vs_library"] == pytest.approx(cands["smem_tiled"]["time_us"] / cands["mma_sync"]["time_us"])
    assert row["best_baseline"] == pr["best_baseline"] and "cublas" in row["baselines_us"]


def test_heldout_table_counts_shapes_without_a_model_kernel_as_losses(tmp_path):
    from hgemm.report.tables import heldout_rows, heldout_table

    results = json.loads(FIXTURE.read_text())
    probs = results["problems"][:3]
    for pr in probs:  # library at half the strongest baseline's speed; the model: as fast, a quarter, none
        pr["heldout"] = True
        pr["candidates"] = {"library": {"status": "ok", "time_us": 2 * pr["best_baseline_us"], "speedup_vs_best": 0.5}}
    probs[0]["candidates"]["model"] = {"status": "ok", "time_us": probs[0]["best_baseline_us"], "speedup_vs_best": 1.0}
    probs[1]["candidates"]["model"] = {"status": "ok", "time_us": 4 * probs[1]["best_baseline_us"],
                                       "speedup_vs_best": 0.25}
    rows = heldout_rows(results)
    assert [r["model_vs_library"] for r in rows] == [2.0, 0.5, None]
    sentence, headers, cells = heldout_table(rows)
    assert "kept a verified kernel for 2" in sentence and "on 1 of 3 (33%)" in sentence
    assert cells[2][4] == "no kernel kept" and cells[2][7] == "—"
    out = tmp_path / "report"
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps(results))
    assert report_stage.main(["--config", _config(tmp_path), "--bench", str(bench), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "### Held-out shapes" in md and "beats the seed library's on 1 of 3" in md


def test_the_model_beats_the_library_only_with_another_kernel_faster_beyond_the_spread():
    from hgemm.report.tables import heldout_rows, heldout_table

    def timed(us, spread):
        return {"status": "ok", "time_us": us, "speedup_vs_best": 10 / us,
                "timing": {"median_us": us, "p10_us": us * (1 - spread), "p90_us": us * (1 + spread)}}

    results = json.loads(FIXTURE.read_text())
    probs = results["problems"][:3]
    for pr in probs:
        pr["heldout"] = True
        pr["kernels"] = {"library": "k"}
        pr["candidates"] = {"library": timed(10.0, 0.005)}
    probs[0]["candidates"]["model"] = timed(9.95, 0.005)   # 0.5% faster, inside the spread: not a win
    probs[1]["candidates"]["model"] = timed(8.0, 0.005)    # 20% faster, another kernel: a win
    probs[2]["candidates"]["model"] = timed(8.0, 0.005)    # as fast, but the library's own kernel again
    probs[2]["kernels"]["model_is_library_kernel"] = True
    rows = heldout_rows(results)
    assert [r["beats_library"] for r in rows] == [False, True, False]
    assert [r["same_kernel"] for r in rows] == [False, False, True]
    sentence, _, cells = heldout_table(rows)
    assert "on 1 of 3 (33%)" in sentence and "On 1 it wrote the library's own kernel" in sentence
    assert "0 of these wins are kernels the library holds" in sentence
    assert cells[2][7].endswith("(its kernel)")
    # the winning kernel is one the library holds for other shapes: a better choice among its kernels
    probs[1]["kernels"]["model_library_kernel"] = "k2"
    sentence, _, _ = heldout_table(heldout_rows(results))
    assert "1 of these wins are kernels the library holds for other shapes" in sentence and ", 0 kernels it does not" in sentence


def test_curves_without_a_verified_completion_are_flagged(tmp_path):
    # the gpu-quick DAG run: no rl_hgemm completion verified in any step
    folder = tmp_path / "rl_hgemm"
    folder.mkdir()
    (folder / "curves.json").write_text(
        (ROOT / "benchmarks" / "dag_gpu_quick" / "rl_hgemm" / "curves.json").read_text())
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--rl-hgemm", str(folder), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "No rl_hgemm completion passed verification in any step" in md


def test_rl_probe_is_reported_before_and_after(tmp_path):
    from training.probe import probe_summary, status_rates

    def probe(per, model):
        return {"model": model, "k": 2, "timed": True, "per_problem": per, **status_rates(per)}

    before = probe({"a": {"statuses": {"ok": 1, "parse_error": 1}, "best_speedup": 0.1},
                    "b": {"statuses": {"wrong": 2}, "best_speedup": None}}, "start")
    after = probe({"a": {"statuses": {"ok": 2}, "best_speedup": 0.3},
                   "b": {"statuses": {"ok": 1, "wrong": 1}, "best_speedup": 0.2}}, "trained")
    folder = tmp_path / "rl_hgemm"
    folder.mkdir()
    (folder / "curves.json").write_text(json.dumps([{"step": 1, "reward": -1.0, "correct_rate": 0.5}]))
    # with context, the trained model got worse: its table must be the second one, under its own lead
    (folder / "metrics.json").write_text(json.dumps({"probe": probe_summary(before, after),
                                                     "probe_context": probe_summary(after, before)}))
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--rl-hgemm", str(folder), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "before and after training. Problems with a verified kernel both times: 1; only after: 1; only" in md
    assert md.index("| correct rate | 0.250 | 0.750 |") < md.index("| correct rate | 0.750 | 0.250 |")
    assert "(rose on 1) | 0.100 | 0.300 |" in md
    lead = md.index("With the contrastive context of the final kernel database in each prompt: The same 2")
    assert md.index("| correct rate | 0.250 | 0.750 |") < lead < md.index("| correct rate | 0.750 | 0.250 |")


def test_the_held_out_curve_is_a_row_per_evaluation_with_the_columns_it_has():
    headers, cells = heldout_curve_table([{"step": 0, "reward": -2.0, "correct_rate": 0.25},
                                          {"step": 3, "reward": -1.0, "correct_rate": 0.5, "speedup_geomean": 0.4}])
    assert headers == ["step", "reward", "correct_rate", "speedup_geomean"]
    assert cells == [["0", "-2.000", "0.250", "—"], ["3", "-1.000", "0.500", "0.400"]]


def test_curve_groups_and_first_last():
    curves = [{"step": i, "reward": float(i), "compile_rate": 0.5, "kl": 0.1} for i in range(10)]
    groups = curve_keys(curves)
    assert groups == {"reward": ["reward"], "compile": ["compile_rate"]}
    headers, cells = first_last_table(curves, ["reward"])
    assert cells == [["reward", "0.500", "8.500"]]
    # 7 steps: ceil(20%) = 2 rows a phase, as training.grpo.compare_phases counts them for metrics.json
    from training.grpo import compare_phases

    headers, cells = first_last_table(curves[:7], ["reward"])
    assert headers[1] == "first 20% (2 steps)" and cells == [["reward", "0.500", "5.500"]]
    assert compare_phases(curves[:7])["reward"] == {"first": 0.5, "last": 5.5}


def test_where_a_steps_time_went():
    from hgemm.report.tables import step_time_table

    curves = [{"step": 1, "step_seconds": 60.0, "judge_seconds": 50.0, "judge_reference_seconds": 20.0,
               "judge_timed_seconds": 10.0},
              {"step": 2, "step_seconds": 20.0, "judge_seconds": 10.0, "judge_reference_seconds": 2.0}]
    headers, cells = step_time_table(curves)
    assert headers == ["part", "seconds a step", "share of the step"]
    assert cells == [["the step", "40.00", "1.000"], ["judging its completions", "30.00", "0.750"],
                     ["reference", "11.00", "0.275"], ["timed", "10.00", "0.250"]]
    assert step_time_table([{"step": 1, "reward": 0.0}]) is None  # no step times logged


def test_goals_summary_from_the_h200_tune():
    """The per-class goals are judged from a real tune results file."""
    from hgemm.summary import goals_markdown

    results = json.loads((ROOT / "benchmarks" / "tune" / "bench.json").read_text())
    md = goals_markdown(results)
    assert "| aligned 4096^3 | 1 | vs_cublas |" in md and "## Misses" in md
    assert "Whole grid (59 shapes)" in md
    assert "torch.compile max-autotune was not timed in this run" in md  # this tune left it out
    # each miss against the run's own ceilings: 4096^3 (0.98x cuBLAS: a miss of the 1.0 bar, not of the
    # 0.95 one) is compute-bound, its roofline the flops at what cuBLAS reached at 8192^3 in this run
    assert not any(line.startswith("| b1_m4096_n4096_k4096_NN | aligned >= 2048") for line in md.splitlines())
    row = next(line for line in md.splitlines() if line.startswith("| b1_m4096_n4096_k4096_NN | aligned 4096^3"))
    ceiling = next(iter(results["ceilings"].values()))["cublas_fp16_tflops_8192"]
    assert f"| compute | {2 * 4096**3 / (ceiling * 1e6):.1f} |" in row
    results["options"]["torch_compile"] = True
    assert "not timed" not in goals_markdown(results) and "pad8_cublas, torch_compile." in goals_markdown(results)
    # a run that measured the write-only ceiling too says it beside the copy bandwidth
    assert "write-only" not in md
    next(iter(results["ceilings"].values()))["write_gbps"] = 3987.4
    assert "Copy bandwidth in this run: 4268 GB/s (write-only: 3987 GB/s)." in goals_markdown(results)


def test_a_baseline_the_machine_could_not_run_is_named_in_every_summary():
    """The default grid's search ran without cuBLASLt (nvmath-python was not on the machine): its
    summaries say so, since its ratios to "the strongest baseline" are to the others; pad-to-8 on
    aligned shapes is skipped by design and not named. The library's run with every baseline names none."""
    from hgemm.summary import baselines_not_run, goals_markdown, libraries_markdown, markdown

    search = json.loads(gzip.open(ROOT / "benchmarks/default_search/tune/bench.json.gz").read())
    assert baselines_not_run(search) == {"cublaslt": (20, "nvmath-python not importable"),
                                         "cublaslt_tuned": (20, "nvmath-python not importable")}
    line = "cublaslt on 20 problems (nvmath-python not importable); cublaslt_tuned on 20 problems"
    assert all(line in md for md in (markdown(search), goals_markdown(search), libraries_markdown(search, ["beside"])))
    assert line in (ROOT / "benchmarks/default_search/tune/summary.md").read_text()
    complete = json.loads(gzip.open(ROOT / "benchmarks/pipeline_library/default.json.gz").read())
    assert any("pad8_cublas" in pr["baselines_skipped"] for pr in complete["problems"])
    assert baselines_not_run(complete) == {} and "not run" not in markdown(complete)


def test_summarize_cli_rewrites_the_markdown_of_a_results_file(tmp_path, capsys):
    from hgemm.cli import main

    out = tmp_path / "goals.md"
    assert main(["summarize", str(ROOT / "benchmarks" / "tune" / "bench.json"), "--goals", "--out", str(out)]) == 0
    assert out.read_text() == (ROOT / "benchmarks" / "tune" / "goals.md").read_text()  # the committed one is current
    assert main(["summarize", str(FIXTURE)]) == 0
    assert "| shape | best baseline |" in capsys.readouterr().out


def test_roofline_bound_and_time():
    from hgemm.summary import roofline_us

    t, bound = roofline_us({"M": 1, "N": 4096, "K": 4096}, 770.0, 4000.0)  # a GEMV: B's 32 MiB dominate
    assert bound == "memory" and t == pytest.approx(2 * (4096 + 4096 * 4096 + 4096) / 4000e9 * 1e6)
    t, bound = roofline_us({"M": 4096, "N": 4096, "K": 4096, "batch": 2}, 800.0, 4000.0)
    assert bound == "compute" and t == pytest.approx(2 * 2 * 4096**3 / 800e12 * 1e6)
    assert roofline_us({"M": 8, "N": 8, "K": 8}, None, 4000.0) == (None, "—")


def test_kernel_database_section(tmp_path):
    # every evaluated candidate is in the RL stages' SQLite databases; the report summarises them
    from training.kerneldb import KernelDB

    folder = tmp_path / "rl_hgemm"
    folder.mkdir()
    with KernelDB(folder / "work.sqlite") as db:
        rows = [("rl_hgemm", 1, "b1_m256_n256_k256_NN", "aligned", "fast()", {"status": "ok", "speedup_vs_best": 0.5,
                 "speedup_vs_cublas": 0.55, "time_us": 10.0}, -0.7, "policy"),
                ("rl_hgemm", 2, "b1_m256_n256_k256_NN", "aligned", "fast()", {"status": "ok", "speedup_vs_best": 0.4,
                 "time_us": 12.0}, -0.9, "policy"),  # the same kernel measured again: its lower figure counts
                ("rl_hgemm", 2, "b1_m256_n256_k256_NN", "aligned", "slow()", {"status": "ok", "speedup_vs_best": 0.1,
                 "time_us": 50.0}, -2.3, "policy"),
                ("rl_hgemm", 2, "b1_m64_n64_k64_NN", "aligned", "bad()", {"status": "compile_error",
                 "error": "kernel.cu(3): error: x | y\nmore"}, -5.0, "policy")]
        db.record_many(rows)
        db.copy_to(folder / "kernels.sqlite")
    out = tmp_path / "report"
    assert report_stage.main(["--config", _config(tmp_path), "--rl-hgemm", str(folder), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    section = md[md.index("## Kernel database"):md.index("## Corpus")]
    assert "Not available: no rl_general kernels.sqlite" in section
    assert "4 evaluations of 3 distinct kernels on 2 problems over 2 steps; 1 problems have a verified kernel." in section
    assert "| ok | 3 |" in section and "| compile_error | 1 |" in section
    assert "| b1_m256_n256_k256_NN | aligned |" in section and "| 0.400 |" in section and "0.500" not in section
    assert "kernel.cu(3): error: x \\| y |" in section  # one line, the pipe escaped
    assert not list(folder.glob("kernels.sqlite-*"))  # read without leaving lock files beside it



def test_libraries_side_by_side_per_subset_and_from_several_gzipped_parts(tmp_path, capsys):
    import gzip

    from hgemm.cli import main
    from hgemm.summary import libraries_markdown

    def part(shapes):
        return {"problems": [{"problem": Problem(*s).to_dict(), "candidates": {
            "old:k1": {"status": "ok", "speedup_vs_best": old}, "new:k2": {"status": "ok", "speedup_vs_best": new}}}
            for s, old, new in shapes]}

    first = part([((64, 64, 64), 0.5, 1.0), ((300, 1001, 77, 1, "TN"), 0.25, 0.5)])
    second = part([((4096, 4096, 4096), 1.0, 0.9)])
    md = libraries_markdown({"problems": first["problems"] + second["problems"]}, ["old", "new"])
    assert "| all | 3 | new | 0.766 | 0.500 | 1 | 1 | 2 |" in md
    assert "| all | 3 | old | 0.500 | 0.250 | 1 | 2 | 1 |" in md
    assert "| TN, odd N or K | 1 | new | 0.500 | 0.500 | 0 | 1 | 1 |" in md
    # a perfect choice between the two: 1.0, 0.5 and 1.0
    assert "| all | 3 | the faster per shape | 0.794 | 0.500 | 2 | 1 | — |" in md
    with gzip.open(tmp_path / "a.json.gz", "wt") as f:
        f.write(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    assert main(["summarize", str(tmp_path / "a.json.gz"), str(tmp_path / "b.json"), "--libraries", "old,new"]) == 0
    assert capsys.readouterr().out.strip() == md.strip()


def test_before_after_on_held_out_shapes_with_a_bootstrap_interval():
    from hgemm.report.tables import before_after, before_after_rows, before_after_table

    def pr(key, after_us, before_us, heldout=True):
        c = {}
        if after_us:
            c["model"] = {"status": "ok", "time_us": after_us, "speedup_vs_best": 10 / after_us}
        if before_us:
            c["before"] = {"status": "ok", "time_us": before_us, "speedup_vs_best": 10 / before_us}
        return {"problem": Problem.from_key(key).to_dict(), "heldout": heldout, "candidates": c}

    results = {"problems": [pr("b1_m64_n64_k64_NN", 10, 20), pr("b1_m128_n64_k64_NN", 10, 40),
                            pr("b1_m256_n64_k64_NN", 10, 10), pr("b1_m512_n64_k64_NN", 10, None),
                            pr("b1_m999_n64_k64_NN", 10, 100, heldout=False)]}
    rows = before_after_rows(results)
    assert [r["after_vs_before"] for r in rows] == [2.0, 4.0, 1.0, None]  # the trained-on shape left out
    s = before_after(rows)
    assert s["shapes"] == 3 and s["after_only"] == 1 and s["before_only"] == 0
    assert s["geomean"] == pytest.approx(2.0)
    lo, hi = s["ci95"]
    assert 1.0 <= lo < 2.0 < hi <= 4.0 and before_after(rows) == s  # seeded: the same interval again
    sentence, headers, cells = before_after_table(rows)
    assert "2.000x as fast" in sentence and "only the RL-trained model kept one on 1" in sentence
    assert cells[3][1] == "no kernel kept" and cells[3][5] == "—"


def test_the_kernel_database_section_counts_the_stage_s_training_only(tmp_path):
    from hgemm.report.inputs import kernel_db_summary
    from training.kerneldb import KernelDB

    db = KernelDB(tmp_path / "kernels.sqlite")
    ok = {"status": "ok", "speedup_vs_best": 0.5, "time_us": 9.0}
    db.record("rl_hgemm", 1, "b1_m64_n64_k64_NN", "edge", "trained()", ok, -0.7, "policy")
    db.record("rl_hgemm_heldout", 1, "b1_m96_n96_k96_NN", "edge", "held()", ok | {"speedup_vs_best": 2.0}, 0.7, "policy")
    db.close()
    summary = kernel_db_summary(tmp_path / "kernels.sqlite", "rl_hgemm")
    assert summary["evaluations"] == 1 and [r["problem_key"] for r in summary["best"]] == ["b1_m64_n64_k64_NN"]

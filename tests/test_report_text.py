"""The report says only what it shows: captions name the panels drawn, rate axes span 0..1, corpus
statistics appear once, an untimed run claims no timing settings, held-out shapes are marked where the
text says they are, and a missing value is a dash, never "None"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from configured import DEFAULT
from stages import report as report_stage

ROOT = Path(__file__).parents[1]
FIXTURE = ROOT / "benchmarks" / "harness" / "honest_default.json"
pytest.importorskip("matplotlib")


def _report(tmp_path, *args: str) -> str:
    config = tmp_path / "report.yaml"
    config.write_text("report:\n  title: Test report\n")
    out = tmp_path / "report"
    assert report_stage.main(["--config", str(DEFAULT), "--config", str(config), *args, "--out", str(out)]) == 0
    return (out / "report.md").read_text()


def _untimed(heldout: int = 0) -> dict:
    data = json.loads(FIXTURE.read_text())
    data["gpu_run"] = False
    data["options"]["reps"] = 1
    for i, pr in enumerate(data["problems"]):
        pr["candidates"] = {name: {"status": "compiled"} for name in pr["candidates"]}
        pr["heldout"] = i < heldout
        for key in ("baselines", "best_baseline", "best_baseline_us"):
            pr.pop(key, None)
    return data


def test_rl_curve_caption_names_the_panels_drawn_and_rates_span_zero_to_one(tmp_path, monkeypatch):
    from hgemm.report import figures

    folder = tmp_path / "rl_hgemm"  # a run whose completions never compiled: rates all zero, no speedup
    folder.mkdir()
    (folder / "curves.json").write_text(json.dumps(
        [{"step": i, "reward": -4.0 + i / 10, "compile_rate": 0.0, "correct_rate": 0.0} for i in range(1, 8)]))
    md = _report(tmp_path, "--rl-hgemm", str(folder))
    assert "*Reward, compile and correct curves of rl_hgemm*" in md and "speedup curves" not in md
    drawn = []
    monkeypatch.setattr(figures, "_png", lambda fig: drawn.append(fig) or b"png")
    figures.curves_figure(json.loads((folder / "curves.json").read_text()),
                          {"reward": ["reward"], "compile": ["compile_rate"], "correct": ["correct_rate"]}, "t")
    reward, compile_, correct = drawn[0].axes
    assert compile_.get_ylim() == correct.get_ylim() == pytest.approx((-0.03, 1.03))
    assert reward.get_ylim()[1] < 0  # other panels keep their own range


def test_corpus_statistics_appear_once_as_tables(tmp_path):
    md = _report(tmp_path, "--corpus", str(ROOT / "benchmarks" / "corpus"))
    corpus = md[md.index("## Corpus"):md.index("## Stage metrics")]
    assert "```" not in corpus and "# CUDA corpus statistics" not in corpus
    assert corpus.count("| source | package |") == 1 and corpus.count("### By licence") == 1
    total = json.loads((ROOT / "benchmarks" / "corpus" / "stats.json").read_text())["total"]
    assert f"{total['bytes']:,} bytes" in corpus and "### Splits" in corpus and "### Pipeline" in corpus


def test_an_untimed_run_claims_no_timing_settings(tmp_path):
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps(_untimed()))
    md = _report(tmp_path, "--bench", str(bench))
    assert "59 shapes from `configs/grids/default.yaml`; compiled only, nothing was timed." in md
    assert "repetitions" not in md and "cold L2" not in md and "spin_batch, 1" not in md


def test_a_timed_run_states_its_repetitions(tmp_path):
    md = _report(tmp_path, "--bench", str(FIXTURE))
    assert "timing method `spin_batch`, 5 repetitions, cold L2, median." in md
    assert "*Speedup of the kernel over the strongest baseline on M × N, one panel per K (batch 1) and one per " \
           "batch size, per layout*" in md


def test_heldout_shapes_are_marked_where_the_text_says(tmp_path):
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps(_untimed(heldout=2)))
    md = _report(tmp_path, "--bench", str(bench))
    assert "2 held-out shapes are marked in the per-shape table (column “held out”)" in md
    header = next(line for line in md.splitlines() if line.startswith("| shape | class |"))
    assert header.startswith("| shape | class | held out |")
    marked = [line.split(" | ")[0][2:] for line in md.splitlines() if line.startswith("| b") and " | yes | " in line]
    assert marked == ["b1_m128_n128_k128_NN", "b1_m256_n256_k256_NN"]


def test_missing_values_are_dashes_not_none(tmp_path):
    tune = tmp_path / "tune"
    tune.mkdir()
    (tune / "metrics.json").write_text(json.dumps({"geomean_speedup_vs_best_baseline": None, "tuned_shapes": 0}))
    md = _report(tmp_path, "--tune", str(tune))
    html = (tmp_path / "report" / "report.html").read_text()
    assert "| tune | geomean_speedup_vs_best_baseline | — |" in md
    assert "None" not in md and "<td>None</td>" not in html

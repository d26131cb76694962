"""Dispatch rules judged offline on what tunes measured: each tuned shape left out in turn."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from hgemm import dispatch_eval
from hgemm.problem import Problem

MMA = (ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()


def _tune(folder, measured: dict[Problem, dict[str, float]]):
    """A tune folder: each shape's winner is its fastest timed kernel; the kernels are copies of the
    reference kernel under the names used."""
    (folder / "kernels").mkdir(parents=True)
    names = {n for times in measured.values() for n in times}
    for name in names:
        (folder / "kernels" / f"{name}.cu").write_text(MMA.replace("hgemm_mma_sync", name))
    entries = {p.key: {"kernel": min(t, key=t.get)} for p, t in measured.items()}
    (folder / "table.json").write_text(json.dumps({"fallback": "a", "entries": entries}))
    problems = [{"problem": p.to_dict(), "candidates": {n: {"status": "ok", "time_us": us} for n, us in t.items()}}
                for p, t in measured.items()]
    (folder / "bench.json").write_text(json.dumps({"problems": problems}))
    return folder


def test_each_rule_is_scored_by_its_picks_time_on_the_left_out_shape(tmp_path):
    # "fast" wins the two shapes around the probe; the probe's nearest shape is won by "odd", which is
    # slow everywhere else: nearest picks it and loses 3x, the measured rule picks "fast"
    probe, near, mid, far = (Problem(1024, 1024, 1024), Problem(1100, 1024, 1024), Problem(2048, 1024, 1024),
                             Problem(512, 1024, 1024))
    folder = _tune(tmp_path / "lib", {
        probe: {"fast": 10.0, "odd": 30.0},
        near: {"odd": 9.0, "fast": 10.0},
        mid: {"fast": 10.0, "odd": 40.0},
        far: {"fast": 10.0, "odd": 40.0},
    })
    shapes, texts = dispatch_eval.load_shapes([folder])
    result = dispatch_eval.evaluate(shapes, texts)
    row = next(r for r in result["rows"] if r["shape"] == probe.key)
    assert row["nearest"] == {"kernel": "odd", "slowdown": 3.0}
    assert row["measured"] == {"kernel": "fast", "slowdown": 1.0}
    assert result["summary"]["measured"]["geomean_slowdown"] < result["summary"]["nearest"]["geomean_slowdown"]
    assert "| nearest |" in dispatch_eval.markdown(result)


def test_a_folder_without_measurements_is_an_error(tmp_path, capsys):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "table.json").write_text(json.dumps({"fallback": "a", "entries": {}}))
    assert dispatch_eval.main([str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert "no bench.json" in capsys.readouterr().err


def test_unknown_rule_is_named():
    with pytest.raises(ValueError, match="unknown rule"):
        dispatch_eval.Rules([], {}).pick("closest", None)

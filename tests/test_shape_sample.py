"""The log-uniform shape samples: deterministic, within their caps, each kind at its share, disjoint
from the grids they exclude, and the committed sample files exactly what their recorded command makes."""

import math
import shlex
from collections import Counter
from pathlib import Path

import pytest

from hgemm import shape_sample
from hgemm.problem import load_grid

ROOT = Path(__file__).resolve().parents[1]


def test_same_seed_same_sample_and_another_seed_another():
    a = shape_sample.sample_shapes(60, seed=5)
    assert a == shape_sample.sample_shapes(60, seed=5)
    assert a != shape_sample.sample_shapes(60, seed=6)


def test_kinds_hold_their_shares_and_caps_hold():
    problems = shape_sample.sample_shapes(200, seed=3)
    assert len({p.key for p in problems}) == 200
    counts = Counter(p.shape_class for p in problems)
    assert counts == shape_sample.quotas(200)
    for kind, share in shape_sample.KIND_SHARE.items():
        assert abs(counts[kind] - share * 200) < 1
    assert all(p.flops <= shape_sample.MAX_FLOPS and p.min_bytes <= shape_sample.MAX_BYTES for p in problems)
    assert all(shape_sample.kind_of(p) == p.shape_class for p in problems)
    dims = [d for p in problems for d in (p.M, p.N, p.K)]
    assert any(d % 2 for d in dims) and any(d % 64 == 0 for d in dims)
    assert {p.layout for p in problems} == {"NN", "TN"}


def test_draws_spread_log_uniformly():
    import random

    rng = random.Random(0)
    logs = [math.log2(shape_sample.draw_dim(rng)) for _ in range(4000)]
    # log-uniform over 1..2^14: about half of the draws fall below 2^7
    below = sum(x < 7 for x in logs) / len(logs)
    assert 0.4 < below < 0.6
    assert max(logs) <= 14 and min(logs) >= 0


def test_excluded_keys_are_never_drawn():
    first = shape_sample.sample_shapes(80, seed=11)
    second = shape_sample.sample_shapes(80, seed=11, exclude={p.key for p in first[:40]})
    assert not {p.key for p in first[:40]} & {p.key for p in second}


def test_too_small_a_request_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        shape_sample.sample_shapes(0, seed=1)


@pytest.mark.parametrize("name", ["sample", "heldout", "heldout_quick", "sample_fit", "sample_heldout", "rl_train"])
def test_committed_sample_is_what_its_command_makes(name, tmp_path, monkeypatch):
    path = ROOT / "configs" / "grids" / f"{name}.yaml"
    command = path.read_text().splitlines()[1].lstrip("# ").strip()
    argv = shlex.split(command)[3:]
    made = {}
    for flag in ("--out", "--heldout-out"):
        if flag in argv:
            i = argv.index(flag)
            made[Path(argv[i + 1]).name] = argv[i + 1] = str(tmp_path / f"again{flag}.yaml")
    monkeypatch.chdir(ROOT)
    assert shape_sample.main(argv) == 0
    again = Path(made[path.name]).read_text()
    assert again.splitlines()[2:] == path.read_text().splitlines()[2:]


def test_a_split_holds_out_every_nth_shape_of_each_kind_and_loses_none():
    problems = shape_sample.sample_shapes(100, seed=4)
    fit, held = shape_sample.split(problems, 5)
    assert sorted(p.key for p in fit + held) == sorted(p.key for p in problems) and not set(fit) & set(held)
    kinds = Counter(p.shape_class for p in problems)
    assert Counter(p.shape_class for p in held) == {k: (n + 2) // 5 for k, n in kinds.items()}
    with pytest.raises(ValueError, match="at least 2"):
        shape_sample.split(problems, 1)


def test_the_split_sample_is_the_sample():
    grids = ROOT / "configs" / "grids"
    whole = {p.key for p in load_grid(grids / "sample.yaml")}
    fit, held = ({p.key for p in load_grid(grids / f"{n}.yaml")} for n in ("sample_fit", "sample_heldout"))
    assert fit | held == whole and not fit & held and len(whole) >= 300 and len(held) >= 60


@pytest.mark.parametrize("name, least", [("heldout", 40), ("heldout_quick", 12)])
def test_heldout_grid_is_disjoint_from_every_tuning_and_training_grid(name, least):
    grids = ROOT / "configs" / "grids"
    heldout = {p.key for p in load_grid(grids / f"{name}.yaml")}
    assert len(heldout) >= least
    for other in ("sample", "default", "quick", "offgrid", "smoke", "heldout", "rl_train"):
        if other != name:
            assert not heldout & {p.key for p in load_grid(grids / f"{other}.yaml")}, other


def test_the_rl_training_shapes_are_untuned_and_never_held_out():
    # rl_hgemm (configs/gpu-rl.yaml) trains where the held-out evaluation asks: on shapes no tune measured,
    # whose prompts end on the library's dispatch choice
    grids = ROOT / "configs" / "grids"
    train = {p.key for p in load_grid(grids / "rl_train.yaml")}
    assert len(train) >= 1000
    for other in ("sample", "default", "quick", "offgrid", "smoke", "heldout", "heldout_quick", "split_k"):
        assert not train & {p.key for p in load_grid(grids / f"{other}.yaml")}, other

import pytest

from conftest import ROOT
from hgemm.problem import Problem, expand_group, load_grid


def test_problem_shapes_and_counts():
    p = Problem(3, 5, 7, 2, "TN")
    assert p.a_shape == (2, 3, 7) and p.b_shape == (2, 5, 7) and p.c_shape == (2, 3, 5)
    assert p.flops == 2 * 2 * 3 * 5 * 7
    assert p.min_bytes == 2 * 2 * (3 * 7 + 7 * 5 + 3 * 5)
    assert Problem.from_key(p.key) == Problem(3, 5, 7, 2, "TN", "adhoc")


def test_invalid_problem_fields():
    with pytest.raises(ValueError, match="M"):
        Problem(0, 1, 1)
    with pytest.raises(ValueError, match="layout"):
        Problem(1, 1, 1, 1, "NT")


def test_group_forms():
    assert len(expand_group({"class": "c", "cube": {"start": 128, "stop": 1024}})) == 4
    prod = expand_group({"class": "s", "M": [1, 16], "N": 4096, "K": [4096, 14336], "layouts": ["NN", "TN"]})
    assert len(prod) == 8 and {p.layout for p in prod} == {"NN", "TN"}
    batched = expand_group({"class": "b", "cube": [64, 128], "batch": [4, 256]})
    assert {(p.M, p.batch) for p in batched} == {(64, 4), (64, 256), (128, 4), (128, 256)}
    explicit = expand_group({"class": "x", "shapes": [[1, 2, 3], [4, 5, 6, 7]]})
    assert explicit[1] == Problem(4, 5, 6, 7, "NN", "x")
    with pytest.raises(ValueError, match="missing"):
        expand_group({"class": "bad", "M": [1]})


def test_default_grid_covers_the_issue_classes():
    problems = load_grid(ROOT / "configs/grids/default.yaml")
    classes = {p.shape_class for p in problems}
    assert {"aligned", "misaligned", "skinny", "batched_small", "llm"} <= classes
    cubes = {p.M for p in problems if p.shape_class == "aligned"}
    assert min(cubes) == 128 and max(cubes) == 16384
    mis = [p for p in problems if p.shape_class == "misaligned"]
    assert any(p.M == 4095 for p in mis) and any(p.M == 8193 for p in mis)
    assert any(p.M == 1 for p in problems if p.shape_class == "skinny")
    assert max(p.batch for p in problems) >= 256
    assert len({(p.M, p.N, p.K, p.batch, p.layout) for p in problems}) == len(problems)

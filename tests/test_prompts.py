"""The prompt format and the completion-to-candidate cut that the RL stages rely on."""

from pathlib import Path

import pytest

from hgemm.candidate import parse_candidate
from hgemm.problem import Problem
from training.prompts import (
    CANDIDATE_TOKEN,
    END_TOKEN,
    PROBLEM_TOKEN,
    completion_to_candidate,
    format_problem_prompt,
    format_training_example,
)

NAIVE = (Path(__file__).parents[1] / "kernels_corpus" / "reference" / "naive.cu").read_text()


def test_prompt_frames_one_problem():
    p = Problem(1024, 2048, 512, 4, "TN")
    prompt = format_problem_prompt(p)
    assert prompt.startswith(PROBLEM_TOKEN) and prompt.endswith(CANDIDATE_TOKEN + "\n")
    assert prompt.count(PROBLEM_TOKEN) == prompt.count(CANDIDATE_TOKEN) == 1
    for needle in ("M=1024", "N=2048", "K=512", "batch=4", "TN", "sm_90a", "__half* A", "void* workspace"):
        assert needle in prompt
    assert END_TOKEN not in prompt


def test_prompt_is_deterministic_and_shape_specific():
    a, b = Problem(128, 128, 128), Problem(128, 128, 256)
    assert format_problem_prompt(a) == format_problem_prompt(a)
    assert format_problem_prompt(a) != format_problem_prompt(b)


def test_contrastive_context_shows_speedups_in_order():
    prompt = format_problem_prompt(Problem(256, 256, 256), context=[("kernel_one()", 1.5), ("kernel_two()", 0.25)])
    assert prompt.index("1.50x") < prompt.index("kernel_one()") < prompt.index("0.25x") < prompt.index("kernel_two()")
    assert prompt.index("kernel_two()") < prompt.index(CANDIDATE_TOKEN)


def test_round_trip_training_example_to_candidate():
    p = Problem(256, 256, 256)
    example = format_training_example(p, NAIVE)
    completion = example[len(format_problem_prompt(p)):]
    text = completion_to_candidate(completion)
    assert parse_candidate(text).spec.entry == "hgemm_naive"
    assert text == NAIVE.strip()


@pytest.mark.parametrize(
    "completion",
    [
        NAIVE + END_TOKEN + "\nthen the model rambled on",
        "Here it is:\n```cuda\n" + NAIVE + "```\n" + END_TOKEN,
        CANDIDATE_TOKEN + "\n" + NAIVE,  # a completion that echoes the candidate token
    ],
)
def test_completion_to_candidate_variants(completion):
    assert parse_candidate(completion_to_candidate(completion)).spec.entry == "hgemm_naive"


def test_completion_without_spec_stays_unparseable():
    text = completion_to_candidate("int main() { return 0; }" + END_TOKEN)
    assert text == "int main() { return 0; }"
    with pytest.raises(ValueError):
        parse_candidate(text)


def test_unmeasured_context_says_so():
    prompt = format_problem_prompt(Problem(64, 64, 64), context=[("kernel_one()", None), ("kernel_two()", 0.5)])
    assert prompt.index("speed not measured") < prompt.index("kernel_one()") < prompt.index("0.50x")
    assert "Nonex" not in prompt

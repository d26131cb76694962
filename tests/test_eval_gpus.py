"""Where the RL stages time their rewards: on the GPUs the policy does not train on, when there are any."""

import pytest

import training.grpo
from configured import settings
from hgemm.pool import evaluation_gpus
from training.grpo import JudgeSettings


@pytest.mark.parametrize("setting, visible, expected", [
    ("auto", [0, 1], [1]),            # two GPUs: policy on 0, rewards timed on 1
    ("auto", [0, 1, 2, 3], [1, 2, 3]),
    ("auto", [0], [0]),               # one GPU: shared, the step waits for its rewards
    ("auto", [2, 5], [5]),            # CUDA_VISIBLE_DEVICES=2,5: the policy's is the first visible
    ("all", [0, 1], [0, 1]),
    ([1], [0, 1], [1]),
])
def test_evaluation_gpus(setting, visible, expected):
    assert evaluation_gpus(setting, visible) == expected


def test_a_gpu_that_is_not_visible_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"GPU\(s\) \[3\] not visible"):
        evaluation_gpus([1, 3], [0, 1])


@pytest.mark.parametrize("stage", ["rl_general", "rl_hgemm"])
def test_the_judge_of_each_rl_stage_gets_the_other_gpus(stage, monkeypatch):
    monkeypatch.setattr(training.grpo, "visible_gpus", lambda: [0, 1])
    judge = settings(JudgeSettings, stage, "judge").make_judge()
    assert judge._pool_kw["gpus"] == [1]
    monkeypatch.setattr(training.grpo, "visible_gpus", lambda: [])
    assert settings(JudgeSettings, stage, "judge").make_judge()._pool_kw["gpus"] is None

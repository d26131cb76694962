"""Rewards: class ordering, clipping, the re-check of implausible speedups, timeouts, the CPU
(compile-only) path, and the TRL reward-function contract. Kernels are really parsed and compiled by
KernelJudge; only the GPU pool's answer is faked where a test needs a GPU verdict."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import pytest

from configured import settings
from hgemm.compile import find_nvcc
from hgemm.judge import KernelJudge
from hgemm.problem import Problem
from training.kerneldb import KernelDB
from training.prompts import END_TOKEN
from training.rewards import (
    KernelReward,
    RewardSettings,
    class_rewards,
    group_floor,
    lower_verdict,
    needs_recheck,
    problems_from_json,
    problems_to_json,
    verdict_reward,
)

ROOT = Path(__file__).parents[1]
NAIVE = (ROOT / "kernels_corpus" / "reference" / "naive.cu").read_text()
BROKEN = NAIVE.replace("const int col", "const int col = ;", 1)  # parses, fails to compile
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not available")


class FakePool:
    """Stands in for hgemm.pool.EvaluationPool: answers each candidate with the next canned result."""

    def __init__(self, results: list[dict]):
        self.results = list(results)
        self.calls = 0
        self.jobs = []

    def run(self, jobs):
        self.calls += 1
        self.jobs += jobs
        outs = []
        for problem, entries, *_ in jobs:
            cands = {}
            for e in entries:
                r = dict(self.results.pop(0) if len(self.results) > 1 else self.results[0])
                if r.get("speedup_vs_best"):
                    r.setdefault("time_us", 10.0 / r["speedup_vs_best"])
                cands[e.name] = r
            outs.append({"candidates": cands, "best_baseline": "cublas", "best_baseline_us": 10.0,
                         "seconds": {"reference": 0.25, "timed": 1.5}})
        return outs

    def close(self):
        pass


def reward_settings(**changes) -> RewardSettings:
    """rl_general's reward settings (configs/default.yaml), with `changes`."""
    return settings(RewardSettings, "rl_general", "reward", **changes)


def gpu_judge(results: list[dict]) -> tuple[KernelJudge, FakePool]:
    judge = KernelJudge(gpu=True)
    judge._pool = FakePool(results)  # the only fake: what the GPU worker would have measured
    return judge, judge._pool


def reward_fn(judge, tmp_path, **settings) -> KernelReward:
    return KernelReward(judge, KernelDB(tmp_path / "k.sqlite"), reward_settings(**settings), "test")


def ok(speedup: float) -> dict:
    return {"status": "ok", "speedup_vs_best": speedup}


# ---- pure arithmetic --------------------------------------------------------------------------------

def test_classes_are_ordered_and_speedup_is_a_clipped_log():
    s = reward_settings(clip=2.0, step=0.5)
    r = lambda v: verdict_reward(v, s)  # noqa: E731
    order = [r({"status": "parse_error"}), r({"status": "compile_error"}), r({"status": "timeout"}),
             r({"status": "wrong"}), r(ok(0.5)), r(ok(1.0)), r(ok(2.0))]
    assert order == sorted(order) and len(set(order)) == len(order)
    for runtime in ("unsupported", "launch_error", "timeout", "crash"):
        assert r({"status": runtime}) == r({"status": "timeout"})
    assert r(ok(1.0)) == 0.0 and r(ok(2.0)) == pytest.approx(math.log(2.0))
    assert r(ok(1e6)) == s.clip and r(ok(1e-9)) == -s.clip
    assert r(ok(1e-9)) > r({"status": "wrong"})  # the slowest correct kernel still beats a wrong one
    assert r({"status": "harness_error"}) == r({"status": "wrong"})  # never rewarded for our blind spot
    assert all(v < 0 for k, v in class_rewards(s).items() if k != "compiled")


def test_the_failure_gap_puts_a_groups_failures_just_below_its_slowest_verified_kernel():
    s = reward_settings(clip=2.0, step=0.5)
    verdicts = [ok(2.0), ok(0.5), {"status": "wrong"}, {"status": "parse_error"},   # group a: mixed
                {"status": "compile_error"}, {"status": "parse_error"},             # group b: failures only
                ok(1.0)]                                                            # group c: one verified
    groups = ["a", "a", "a", "a", "b", "b", "c"]
    rewards = [verdict_reward(v, s) for v in verdicts]
    floored = group_floor(rewards, verdicts, groups, 0.5)
    assert floored[:2] == rewards[:2] and floored[2] == floored[3] == pytest.approx(math.log(0.5) - 0.5)
    assert floored[4:6] == rewards[4:6]   # no verified kernel in the group: the ladder, format first
    assert floored[6] == rewards[6] == 0.0
    # the group's order is kept: every failure below every verified kernel of its group
    assert max(floored[2:4]) < min(floored[:2])
    with pytest.raises(ValueError, match="failure_gap"):
        reward_settings(failure_gap=0.0)


@needs_nvcc
def test_the_reward_function_floors_failures_within_trls_groups_of_consecutive_completions(tmp_path):
    import asyncio

    wrong = {"status": "wrong", "error": "mismatch"}
    texts = [NAIVE] + [NAIVE.replace("row", name) for name in ("r0w", "r1w", "r2w")]  # four kernels
    columns = dict(problems=[problems_to_json([Problem(64, 64, 64)])] * 4, problem_key=["k"] * 4, shape_class=["edge"] * 4)
    ladder = class_rewards(reward_settings())["wrong"]

    def rewards(group_size, **extra):
        judge, _ = gpu_judge([ok(2.0), wrong, ok(0.5), wrong])
        reward = KernelReward(judge, KernelDB(tmp_path / f"k{len(extra)}{group_size}.sqlite"),
                              reward_settings(recheck_above=None, failure_gap=0.5), "test", group_size=group_size)
        try:  # one prompt string for all four: a group is a position, as TRL forms them, not a prompt
            return asyncio.run(reward(prompts=["P"] * 4, completions=texts, **columns, **extra))
        finally:
            reward.close()

    assert rewards(2) == [pytest.approx(math.log(2.0)), pytest.approx(math.log(2.0) - 0.5),
                          pytest.approx(math.log(0.5)), pytest.approx(math.log(0.5) - 0.5)]
    # one group of four: both failures under its slowest verified kernel
    assert rewards(4)[1] == rewards(4)[3] == pytest.approx(math.log(0.5) - 0.5)
    # a share that is not whole groups (another process holds the rest), and the held-out evaluation: the ladder
    assert rewards(3)[1] == rewards(2, heldout=[True] * 4)[1] == ladder


def test_recheck_rule_keeps_the_lower_result():
    s = reward_settings(recheck_above=3.0)
    assert needs_recheck(ok(3.5), s) and not needs_recheck(ok(2.9), s)
    assert not needs_recheck(ok(50.0), reward_settings(recheck_above=None))
    assert lower_verdict(ok(10.0), ok(1.2))["speedup_vs_best"] == 1.2
    assert lower_verdict(ok(10.0), {"status": "wrong"})["status"] == "wrong"


def test_problem_columns_round_trip():
    from hgemm.problem import TaskProblem

    ps = [Problem(64, 128, 32, 2, "TN", "edge"), TaskProblem.of("relu_f32", {"n": 1000})]
    assert problems_from_json(problems_to_json(ps)) == ps


# ---- through KernelJudge ------------------------------------------------------------------------------

@needs_nvcc
def test_the_judge_hands_each_task_to_the_pool():
    # the instrument never looks a task up: the job carries the task the judge resolved
    from hgemm.problem import TaskProblem
    from kernels_corpus.tasks import get_task

    judge, pool = gpu_judge([ok(1.5)])
    task = get_task("relu_f32")
    verdicts = judge.judge([task.solution, NAIVE], [[TaskProblem.of(task.name, task.sizes[0])], [Problem(64, 64, 64)]])
    assert [v["status"] for v in verdicts] == ["ok", "ok"]
    assert [job[2] for job in pool.jobs] == [task, None]


@needs_nvcc
def test_cpu_reward_covers_parse_and_compile_and_records_everything(tmp_path):
    reward = reward_fn(KernelJudge(gpu=False), tmp_path)
    completions = ["int main() {}", BROKEN + END_TOKEN, NAIVE + END_TOKEN + " trailing junk"]
    problems = [problems_to_json([Problem(64, 64, 64), Problem(32, 64, 16, 2, "TN")])] * 3
    logged = {}
    rewards = asyncio.run(reward(prompts=["p"] * 3, completions=completions, problems=problems,
                                 problem_key=["b1_m64_n64_k64_NN"] * 3, shape_class=["edge"] * 3,
                                 log_metric=lambda k, v: logged.__setitem__(k, v)))
    reward.close()
    assert rewards[0] < rewards[1] < rewards[2] == reward_settings().compiled_reward
    assert logged["kernel/timed"] == 0.0 and "kernel/correct_rate" not in logged
    assert logged["kernel/parse_rate"] == pytest.approx(2 / 3) and logged["kernel/compile_rate"] == pytest.approx(1 / 3)
    counts = reward.db.status_counts("test")
    # one row per failure, one row per judged problem for the compiled kernel
    assert counts == {"parse_error": 1, "compile_error": 1, "compiled": 2}


@needs_nvcc
def test_gpu_verdicts_are_rewarded_and_rates_logged(tmp_path):
    judge, pool = gpu_judge([ok(2.0), {"status": "wrong", "error": "mismatch"}])
    reward = reward_fn(judge, tmp_path, recheck_above=None)
    rewards, metrics = reward.score([NAIVE, NAIVE.replace("row", "r0w")], [problems_to_json([Problem(64, 64, 64)])] * 2,
                                    ["b1_m64_n64_k64_NN"] * 2, ["edge"] * 2, step=7)
    reward.close()
    assert rewards == [pytest.approx(math.log(2.0)), class_rewards(reward_settings())["wrong"]]
    assert metrics["kernel/correct_rate"] == 0.5 and metrics["kernel/speedup_geomean"] == pytest.approx(2.0)
    assert 0 < metrics["kernel/judge_seconds"] < 120  # the batch's compile and judging, logged beside step_time
    # its GPU side by phase, summed over the batch's problems (one here)
    assert metrics["kernel/judge_reference_seconds"] == 0.25 and metrics["kernel/judge_timed_seconds"] == 1.5
    rewards, metrics = reward.score([NAIVE], [problems_to_json([Problem(64, 64, 64), Problem(64, 64, 32)])],
                                    ["b1_m64_n64_k64_NN"], ["edge"], step=8)
    assert metrics["kernel/judge_timed_seconds"] == 3.0  # this batch's two problems, not the judge's total
    best = reward.db.best("b1_m64_n64_k64_NN")
    assert best["text"] == NAIVE.strip() and best["speedup_vs_best"] == pytest.approx(2.0) and best["time_us"] == pytest.approx(5.0)


@needs_nvcc
def test_copies_of_one_kernel_are_judged_once_and_rewarded_alike(tmp_path):
    # an RL group often holds one corpus render several times: timed side by side, the copies would
    # differ by noise alone, and GRPO would rank identical completions apart
    judge, pool = gpu_judge([ok(1.5), ok(0.5)])
    reward = reward_fn(judge, tmp_path, recheck_above=None)
    problem = problems_to_json([Problem(64, 64, 64)])
    # the third is the first with another comment and its lines re-indented: the same kernel
    recommented = "// measured elsewhere\n" + NAIVE.replace("\n", "\n  ")
    rewards, _ = reward.score([NAIVE, NAIVE.replace("row", "r0w"), recommented], [problem] * 3, ["k"] * 3, ["edge"] * 3)
    reward.close()
    assert [len(entries) for _, entries, *_ in pool.jobs] == [2]
    assert rewards == [pytest.approx(math.log(1.5)), pytest.approx(math.log(0.5)), pytest.approx(math.log(1.5))]
    # on other problems a copy is another candidate
    judge, pool = gpu_judge([ok(1.0)])
    verdicts = judge.judge([NAIVE, NAIVE], [[Problem(64, 64, 64)], [Problem(64, 64, 128)]])
    assert sorted(len(entries) for _, entries, *_ in pool.jobs) == [1, 1]
    assert verdicts[0] is not verdicts[1]


@needs_nvcc
def test_implausible_speedup_is_rejudged_and_the_lower_kept(tmp_path):
    judge, pool = gpu_judge([ok(40.0), ok(1.25)])
    reward = reward_fn(judge, tmp_path, recheck_above=3.0)
    rewards, _ = reward.score([NAIVE], [problems_to_json([Problem(64, 64, 64)])], ["k"], ["edge"])
    reward.close()
    assert pool.calls == 2
    assert rewards == [pytest.approx(math.log(1.25))]


@needs_nvcc
def test_timeouts_and_crashes_are_classified_not_raised(tmp_path):
    judge, _ = gpu_judge([{"status": "timeout", "error": "no progress for 30 s"}, {"status": "crash", "error": "worker died"}])
    reward = reward_fn(judge, tmp_path)
    rewards, metrics = reward.score([NAIVE, NAIVE.replace("row", "r0w")], [problems_to_json([Problem(64, 64, 64)])] * 2,
                                    ["k"] * 2, ["edge"] * 2)
    reward.close()
    runtime = class_rewards(reward_settings())["timeout"]
    assert rewards == [runtime, runtime]
    assert metrics["kernel/timeout_rate"] == 0.5 and metrics["kernel/correct_rate"] == 0.0


def test_a_harness_exception_becomes_data(tmp_path):
    class Exploding:
        gpu = True

        def judge(self, texts, problems):
            raise RuntimeError("pool went away")

    reward = reward_fn(Exploding(), tmp_path)
    rewards, _ = reward.score([NAIVE], [problems_to_json([Problem(8, 8, 8)])], ["k"], ["edge"])
    reward.close()
    assert rewards == [class_rewards(reward_settings())["harness_error"]]
    assert reward.db.status_counts() == {"harness_error": 1}


def test_format_shaping_orders_parse_errors_below_compile_errors():
    from training.rewards import class_rewards, format_progress, verdict_reward

    s = reward_settings()
    naive = (ROOT / "kernels_corpus/reference/naive.cu").read_text()
    garbage = "int main() { return 0; }"
    half = naive.split("@*/")[0]  # a spec that never closes, no kernel
    rewards = [verdict_reward({"status": "parse_error"}, s, t) for t in (garbage, half, naive)]
    assert rewards[0] < rewards[1] < rewards[2] < class_rewards(s)["compile_error"]
    assert format_progress(naive) == 1.0 and format_progress(garbage) == 0.0
    assert verdict_reward({"status": "parse_error"}, s) == class_rewards(s)["parse_error"]


def test_context_metrics_split_prompts_with_and_without_context():
    from training.rewards import context_metrics

    verdicts = [{"status": s} for s in ("ok", "parse_error", "parse_error", "ok", "wrong", "parse_error")]
    shown = [2, 1, 1, 0, 0, 0]
    m = context_metrics(verdicts, shown, timed=True)
    assert m["prompt/context_examples"] == 4 / 6
    assert m["kernel/parse_rate_in_context"] == 1 / 3 and m["kernel/correct_rate_in_context"] == 1 / 3
    assert m["kernel/parse_rate_bare"] == 2 / 3 and m["kernel/correct_rate_bare"] == 1 / 3
    # no GPU: nothing ran, so no correct rates; a batch without bare prompts has no bare rates
    m = context_metrics(verdicts[:3], shown[:3], timed=False)
    assert set(m) == {"prompt/context_examples", "kernel/parse_rate_in_context"}


def test_a_family_render_whose_spec_does_not_fit_its_template_is_a_parse_error_never_judged(tmp_path):
    from kernels_corpus.families import mma_sync, wgmma

    fits = wgmma.render(dict(bm=128, bn=256, consumers=2, stages=3, group_m=8, epilogue="smem"))
    # another variant's block: the template's kernel has 384 threads (two consumer warpgroups)
    misfit = fits.replace("block: 384", "block: 256")
    # a 4-stage mma.sync tile given 2 stages' shared memory: runs only while K is short
    tile = mma_sync.render(next(p for p in mma_sync.variants() if p["stages"] == 4))
    short = re.sub(r"smem: \d+", "smem: 1024", tile)

    class Recording:
        gpu = False
        seen: list[str] = []

        def judge(self, texts, problems):
            self.seen.extend(texts)
            return [{"status": "compiled", "results": [{"problem": problems[0][0].to_dict(), "status": "compiled"}]}
                    for _ in texts]

    judge = Recording()
    reward = reward_fn(judge, tmp_path)
    rewards, _ = reward.score([fits, misfit, short], [problems_to_json([Problem(256, 256, 256)])] * 3,
                              ["k"] * 3, ["edge"] * 3)
    reward.close()
    assert [t.strip() for t in judge.seen] == [fits.strip()]
    statuses = [v["status"] for v in reward.last_verdicts]
    assert statuses == ["compiled", "parse_error", "parse_error"]
    assert "block: block 256, the kernel's is 384" in reward.last_verdicts[1]["error"]
    assert "smem: smem 1024" in reward.last_verdicts[2]["error"]
    assert rewards[1] < rewards[0] and reward.db.status_counts() == {"compiled": 1, "parse_error": 2}


def test_the_evaluators_phases_are_the_ones_the_curves_log():
    # hgemm.evaluate laps its phases by name, the judge counts its own beside them; the curves keep a
    # column for each
    import re

    from conftest import ROOT
    from hgemm.entry import EVAL_PHASES, JUDGE_PHASES
    from training.grpo import CURVE_KEYS

    lapped = re.findall(r'phases\.lap\("(\w+)"\)', (ROOT / "hgemm/evaluate.py").read_text())
    assert tuple(lapped) == EVAL_PHASES
    counted = re.findall(r'phase_seconds\["(\w+)"\]', (ROOT / "hgemm/judge.py").read_text())
    assert sorted(counted) == sorted(JUDGE_PHASES) and not set(JUDGE_PHASES) & set(EVAL_PHASES)
    assert all(f"kernel/judge_{p}_seconds" in CURVE_KEYS for p in JUDGE_PHASES + EVAL_PHASES)

"""Rewards for the RL stages: kernel verdicts (hgemm.judge.KernelJudge) to ordered scalar rewards.

Ordering, worst first (each class a fixed `step` below the one above it):

    parse_error < compile_error < runtime failure (unsupported, launch_error, timeout, crash)
                < wrong < correct but slower (log speedup < 0) < faster (log speedup > 0)

A verified kernel earns clip(log(speedup), -clip, clip), with speedup the geometric mean over the
problems it was judged on (so the log is averaged); `wrong` sits one step below -clip, so even the
slowest correct kernel beats any wrong one. `harness_error` (our fault, not the kernel's) is scored
as `wrong`: a candidate is never rewarded for something we could not verify.

A seed-family render whose launch spec does not fit the template it instantiates (block, shared
memory, TMA boxes or cluster shape of another variant: kernels_corpus.families.consistency) is a
`parse_error` named so, without a compile or a launch: it can only run by luck of the shape (an
under-allocated ring is never touched when K is short).

In a GRPO group (TRL's: `num_generations` consecutive completions of one prompt) that holds a verified
kernel, `failure_gap` (when set) lifts every failure to that far below the group's slowest verified
kernel. The group's ranking is the same, but after standardising, a speed difference among the
verified kernels weighs as much as the failure gap: with the fixed ladder a failure sits 2.5-4 below
zero at clip 2, below every verified kernel (the clip holds the slowest at -2; log speedup p50 -0.48
and p90 0.12 in benchmarks/rl_runs), and in a mixed group the advantage is then mostly "verified or
not". A group without a verified kernel keeps the ladder (format first), and so does the held-out
evaluation, whose reward is a curve, not a training signal.

On a machine without a GPU the judge says `compiled` for a kernel that parsed and compiled; it gets
`compiled_reward` (above every failure), and the logged metrics say the reward covered parse+compile
only.

`KernelReward` is the TRL reward function: `(prompts, completions, **kwargs) -> list[float]`, async so
TRL runs it on its event-loop thread; the judging itself runs in an executor thread (compiles on all
cores, GPU work through the judge's worker pool, whose per-sample timeouts classify hangs), records
every verdict in the KernelDB, and logs compile/correct/speedup rates through TRL's `log_metric`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hgemm.problem import Problem, TaskProblem
from kernels_corpus.families.consistency import judge_fitting
from training.kerneldb import KernelDB
from training.prompts import completion_to_candidate

log = logging.getLogger(__name__)

RUNTIME_FAILURES = ("unsupported", "launch_error", "timeout", "crash")


@dataclass
class RewardSettings:
    """The `reward:` section of an RL stage config (values: configs/default.yaml)."""

    clip: float  # |log speedup| cap: clip 2 is 7.4x either way
    step: float  # gap between failure classes
    compiled_reward: float  # CPU only: parsed and compiled, nothing run
    # A verified speedup above this is re-judged (fresh random inputs) and the lower result kept:
    # implausible speedups are more often a harness blind spot than a breakthrough. null: never.
    recheck_above: float | None
    # Within parse_error only: up to this much for how much of the candidate format the text has, so
    # a GRPO group whose completions all fail to parse (a fresh model's usual case) still has
    # variance to learn from. Kept below `step`, so no parse error ever outscores a compile error.
    format_shaping: float
    # In a GRPO group with a verified kernel, every failure scores this far below the group's slowest
    # verified kernel (group_floor). null: the fixed ladder everywhere.
    failure_gap: float | None = None

    def __post_init__(self):
        if self.clip <= 0 or self.step <= 0:
            raise ValueError("reward.clip and reward.step must be positive")
        if self.failure_gap is not None and self.failure_gap <= 0:
            raise ValueError("reward.failure_gap must be positive or null")
        if not 0 <= self.format_shaping < self.step:
            raise ValueError("reward.format_shaping must be in [0, step)")


def class_rewards(s: RewardSettings) -> dict[str, float]:
    """The fixed reward of every failure class."""
    wrong = -s.clip - s.step
    runtime = wrong - s.step
    return {
        "wrong": wrong,
        "harness_error": wrong,
        **{k: runtime for k in RUNTIME_FAILURES},
        "compile_error": runtime - s.step,
        "parse_error": runtime - 2 * s.step,
        "compiled": s.compiled_reward,
    }


# What a candidate text needs, in the order a writer meets it (hgemm/candidate.py).
FORMAT_MARKERS = ("/*@launch", "entry:", "block:", "grid:", "@*/", 'extern "C"', "__global__")


def format_progress(text: str) -> float:
    """Fraction of the candidate format's markers present in the text, 0..1."""
    return sum(m in text for m in FORMAT_MARKERS) / len(FORMAT_MARKERS)


def verdict_reward(verdict: dict, s: RewardSettings, text: str | None = None) -> float:
    """The reward of one judge verdict; `text` (the candidate) refines parse errors by format progress."""
    status = verdict.get("status")
    if status == "parse_error" and text is not None and s.format_shaping:
        return class_rewards(s)["parse_error"] + s.format_shaping * format_progress(text)
    if status == "ok":
        speedup = verdict.get("speedup_vs_best")
        if not speedup or not math.isfinite(speedup) or speedup <= 0:
            # verified but untimed (no baseline could be timed): correct, speed unknown: neutral
            return 0.0
        return max(-s.clip, min(s.clip, math.log(speedup)))
    table = class_rewards(s)
    return table.get(status, table["parse_error"])


def group_floor(rewards: list[float], verdicts: list[dict], groups: list, gap: float) -> list[float]:
    """The rewards with every failure of a group that holds a verified kernel set to `gap` below that
    group's slowest verified kernel; groups[i] names completion i's group."""
    slowest: dict = {}
    for r, v, g in zip(rewards, verdicts, groups):
        if v.get("status") == "ok":
            slowest[g] = min(r, slowest.get(g, r))
    return [slowest[g] - gap if v.get("status") != "ok" and g in slowest else r
            for r, v, g in zip(rewards, verdicts, groups)]


def needs_recheck(verdict: dict, s: RewardSettings) -> bool:
    return (s.recheck_above is not None and verdict.get("status") == "ok"
            and (verdict.get("speedup_vs_best") or 0.0) > s.recheck_above)


def lower_verdict(first: dict, second: dict) -> dict:
    """Of two verdicts on the same kernel, the less flattering: a failed re-check wins, else the slower."""
    if second.get("status") != "ok":
        return second | {"rechecked": True}
    return min(first, second, key=lambda v: v.get("speedup_vs_best") or 0.0) | {"rechecked": True}


# ------------------------------------------------------------------------------ dataset columns

def problems_to_json(problems: list[Problem | TaskProblem]) -> str:
    """A dataset column holding the problems one prompt's candidates are judged on."""
    return json.dumps([p.to_dict() for p in problems])


def problems_from_json(text: str) -> list[Problem | TaskProblem]:
    out = []
    for d in json.loads(text):
        if "task" in d:
            out.append(TaskProblem(d["task"], tuple(sorted(d["sizes"].items())), d.get("shape_class", "task")))
        else:
            out.append(Problem.from_dict(d))
    return out


# ------------------------------------------------------------------------------ batch scoring

def batch_metrics(verdicts: list[dict], rewards: list[float], timed: bool) -> dict[str, float]:
    """Rates over one batch: what the training curves show."""
    n = len(verdicts) or 1
    statuses = [v.get("status") for v in verdicts]
    passed_compile = sum(s not in ("parse_error", "compile_error") for s in statuses)
    m = {
        "kernel/parse_rate": sum(s != "parse_error" for s in statuses) / n,
        "kernel/compile_rate": passed_compile / n,
        "kernel/timed": 1.0 if timed else 0.0,  # 0: CPU, the reward covered parse+compile only
        "kernel/reward_mean": sum(rewards) / n,
    }
    if timed:
        speedups = [v["speedup_vs_best"] for v in verdicts if v.get("status") == "ok" and v.get("speedup_vs_best")]
        m["kernel/correct_rate"] = sum(s == "ok" for s in statuses) / n
        m["kernel/faster_rate"] = sum(x > 1.0 for x in speedups) / n
        m["kernel/timeout_rate"] = sum(s == "timeout" for s in statuses) / n
        if speedups:
            m["kernel/speedup_geomean"] = math.exp(sum(math.log(x) for x in speedups) / len(speedups))
            m["kernel/speedup_max"] = max(speedups)
    return m


def context_metrics(verdicts: list[dict], context_examples: list[int], timed: bool) -> dict[str, float]:
    """How many kernels the prompts showed, and the parse and correct rates of completions whose prompt
    showed some against those whose prompt showed none (each only when the batch has such prompts).
    A model can do well on bare prompts and fail on prompts that hold a kernel."""
    m = {"prompt/context_examples": sum(context_examples) / len(context_examples)}
    for name, pick in (("in_context", lambda n: n > 0), ("bare", lambda n: n == 0)):
        part = [v.get("status") for v, n in zip(verdicts, context_examples) if pick(n)]
        if part:
            m[f"kernel/parse_rate_{name}"] = sum(s != "parse_error" for s in part) / len(part)
            if timed:
                m[f"kernel/correct_rate_{name}"] = sum(s == "ok" for s in part) / len(part)
    return m


class KernelReward:
    """TRL reward function over kernel completions.

    Dataset columns it reads (TRL passes them as kwargs, one value per completion):
        problems      problems_to_json(...) of the problems the candidate is judged on
        problem_key   the prompt's problem (the DB row of a parse/compile failure goes here)
        shape_class   for the DB
        context_examples  (rl_hgemm only) kernels each prompt's context kept, logged as a curve
    """

    def __init__(self, judge, db: KernelDB, settings: RewardSettings, stage: str, source: str = "policy",
                 verbatim=None, group_size: int | None = None):
        self.judge = judge
        self.group_size = group_size  # GRPO's num_generations: a training batch's groups, for failure_gap
        self.verbatim = verbatim  # kernels_corpus.verbatim.CorpusKernels: completions that recite the corpus
        self.db = db
        self.settings = settings
        self.stage = stage
        self.source = source
        self.__name__ = "kernel"  # TRL names the logged reward column after it: rewards/kernel/mean
        # one thread: batches are judged in order; the judge parallelises inside a batch
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernel-judge")
        self.last_metrics: dict[str, float] = {}
        self.last_verdicts: list[dict] = []  # the last batch's, in completion order (training.rft reads them)

    async def __call__(self, prompts, completions, problems, problem_key, shape_class, trainer_state=None,
                       log_metric=None, context_examples=None, heldout=None, **_):
        step = int(getattr(trainer_state, "global_step", 0) or 0)
        held = bool(heldout) and any(heldout)  # any: a held-out row is never counted as trained on
        # TRL's groups are consecutive, and a process's share of the generation batch is a contiguous slice:
        # whole groups exactly when its length is a multiple of num_generations
        n = len(completions)
        whole = bool(self.group_size) and n % self.group_size == 0
        groups = [i // self.group_size for i in range(n)] if whole and not held else None
        loop = asyncio.get_running_loop()
        rewards, metrics = await loop.run_in_executor(
            self._executor, self.score, completions, problems, problem_key, shape_class, step, context_examples,
            held, groups)
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)
        return rewards

    def score(self, completions: list, problems: list[str], problem_key: list[str], shape_class: list[str],
              step: int = 0, context_examples: list[int] | None = None,
              heldout: bool = False, groups: list | None = None) -> tuple[list[float], dict[str, float]]:
        """Judge a batch (all completions together), reward, record; (rewards, metrics). A held-out batch
        (the evaluation's) is recorded under `<stage>_heldout`, so that nothing counts it as trained on.
        groups: each completion's GRPO group, for reward.failure_gap (None: no groups)."""
        texts = [completion_to_candidate(_as_text(c)) for c in completions]
        plists = [problems_from_json(p) for p in problems]
        began = time.perf_counter()
        phases_before = dict(getattr(self.judge, "phase_seconds", {}))
        verdicts = self.judge_batch(texts, plists)
        judge_seconds = time.perf_counter() - began
        phases = {k: v - phases_before.get(k, 0.0) for k, v in getattr(self.judge, "phase_seconds", {}).items()}
        rewards = [verdict_reward(v, self.settings, t) for v, t in zip(verdicts, texts)]
        if self.settings.failure_gap is not None and groups is not None:
            rewards = group_floor(rewards, verdicts, groups, self.settings.failure_gap)
        self.last_verdicts = verdicts
        self._record(texts, plists, verdicts, rewards, problem_key, shape_class, step,
                     f"{self.stage}_heldout" if heldout else self.stage)
        metrics = batch_metrics(verdicts, rewards, timed=bool(self.judge.gpu))
        # the reward's share of a step (TRL logs the whole step as step_time): compile, verify, time
        metrics["kernel/judge_seconds"] = judge_seconds
        # ... and by phase: the compiles, the GPU evaluations' phases summed over the batch's problems
        # (hgemm.evaluate.Phases: the references, verification, the timing's set-up, cuBLASLt's algorithm
        # choice, the timed batches) and the pool's wall time outside them (hgemm.entry.JUDGE_PHASES)
        metrics |= {f"kernel/judge_{phase}_seconds": v for phase, v in phases.items() if v > 0}
        if self.verbatim is not None:
            metrics["kernel/verbatim_rate"] = sum(self.verbatim.match(t) is not None for t in texts) / (len(texts) or 1)
        if context_examples:  # rl_hgemm's contrastive prompts
            metrics |= context_metrics(verdicts, context_examples, timed=bool(self.judge.gpu))
        self.last_metrics = metrics
        return rewards, metrics

    def judge_batch(self, texts: list[str], plists: list[list]) -> list[dict]:
        """Verdicts for the batch, with implausible speedups re-checked; a harness exception becomes
        `harness_error` verdicts instead of stopping training. A family render whose spec does not fit
        its template is a parse_error, not judged."""
        return judge_fitting(self._judge, texts, plists)

    def _judge(self, texts: list[str], plists: list[list]) -> list[dict]:
        try:
            verdicts = self.judge.judge(texts, plists)
            again = [i for i, v in enumerate(verdicts) if needs_recheck(v, self.settings)]
            if again:
                # EvalOptions.seed is None in the RL configs, so a second evaluation draws fresh inputs
                second = self.judge.judge([texts[i] for i in again], [plists[i] for i in again])
                for i, v in zip(again, second):
                    verdicts[i] = lower_verdict(verdicts[i], v)
            return verdicts
        except Exception as e:  # the harness is ours; its bugs must not be the policy's problem
            log.exception("kernel judge failed on a batch")
            return [{"status": "harness_error", "error": f"{type(e).__name__}: {e}", "results": []} for _ in texts]

    def _record(self, texts, plists, verdicts, rewards, problem_key, shape_class, step, stage) -> None:
        rows = []
        for text, probs, v, r, key, cls in zip(texts, plists, verdicts, rewards, problem_key, shape_class):
            results = v.get("results") or []
            if not results:  # parse/compile failure: one row, on the prompt's problem
                rows.append((stage, step, key, cls, text, v, r, self.source))
            for res in results:  # one row per judged problem: best kernels are kept per shape
                p = res.get("problem") or {}
                pkey = _key_of(p) or key
                rows.append((stage, step, pkey, p.get("shape_class", cls), text, res, r, self.source))
        try:
            self.db.record_many(rows)
        except Exception:
            log.exception("could not record a batch in the kernel database")

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def _as_text(completion) -> str:
    # conversational completions are [{"role": "assistant", "content": ...}]; ours are plain strings
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return completion


def _key_of(problem_dict: dict) -> str | None:
    try:
        if "task" in problem_dict:
            return TaskProblem.of(problem_dict["task"], problem_dict["sizes"]).key
        return Problem.from_dict(problem_dict).key
    except (KeyError, TypeError, ValueError):
        return None

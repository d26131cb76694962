"""The policy before and after an RL stage, on one fixed set of prompts.

Why: the curves' first and last 20% of steps see different prompts, drawn at random. In a run of
ten-odd steps, the phase means mostly measure which problems were drawn. In one rl_hgemm run,
batched-small went from 0 of 8 evaluations correct at one step to 24 of 29 at another, while the
policy hardly moved (KL < 0.0005). The probe samples k completions for each of the same prompts from
the starting model and from the trained one, judges both with the stage's judge, and compares them
problem by problem. Probe completions are not rewarded, trained on or recorded in the kernel
database.
"""

from __future__ import annotations

import gc
import math
from collections import Counter
from dataclasses import dataclass

from hgemm.summary import geomean
from kernels_corpus.families.consistency import judge_fitting
from training.prompts import completion_to_candidate
from training.rewards import problems_from_json


@dataclass
class ProbeSettings:
    """The `probe:` section of an RL stage (values: configs/default.yaml)."""

    prompts: int  # fixed training prompts, spread over the stage's problems (0: no probe)
    k: int  # completions per prompt
    temperature: float
    batch_size: int  # sequences per generate() call
    seed: int


@dataclass
class ContextProbeSettings(ProbeSettings):
    """rl_hgemm's `probe:` section: also probe each problem a second time with its contrastive context
    from the final kernel database (metrics.json `probe_context`)."""

    context: bool


def spread(items: list, n: int) -> list:
    """n items evenly spaced over the list (all of it when n >= its length), in order."""
    if n <= 0 or not items:
        return []
    if n >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)] if n > 1 else [items[0]]


def generation_prompt(tokenizer, rl_prompt: str) -> str:
    """An RL dataset prompt as generate_completions takes it. RL prompts start with prompt_prefix, since
    TRL tokenizes them plainly; generate_completions adds bos itself, so the prefix comes off here
    rather than becoming a second bos. Either way the model sees the same token ids."""
    from training.grpo import prompt_prefix  # training.grpo loads torch, transformers and datasets

    prefix = prompt_prefix(tokenizer)
    return rl_prompt[len(prefix):] if prefix and rl_prompt.startswith(prefix) else rl_prompt


def probe_model(model_dir: str, rows: list[dict], make_judge, settings: ProbeSettings, max_new_tokens: int) -> dict:
    """Sample settings.k completions for each row's prompt from the model saved in model_dir and judge
    them on the row's problems. Rows are RL dataset rows: prompt, problems (JSON), problem_key.
    Returns the rates over all completions and, per problem key, the status counts and best speedup."""
    return probe_model_sets(model_dir, {"rows": rows}, make_judge, settings, max_new_tokens)["rows"]


def probe_model_sets(model_dir: str, row_sets: dict[str, list[dict]], make_judge, settings: ProbeSettings,
                     max_new_tokens: int) -> dict[str, dict]:
    """probe_model for several sets of rows at once (rl_hgemm: bare and in-context), one result per set.
    One load, one generation pass and one judge for all of them: at 2304-token completions each
    generation pass is bound by its longest sequence (~50 s a pass on the H200), so four separate
    passes would not fit a 10-minute rl_hgemm run. A problem may appear in several sets; each set is its own."""
    # torch and transformers only where a model generates (the summaries below need neither)
    import torch

    from training.model import SAMPLING_ATTENTION, load_causal_lm, load_tokenizer
    from training.sampling import generate_completions

    rows = [(name, r) for name, rs in row_sets.items() for r in rs]
    torch.manual_seed(settings.seed)
    tokenizer = load_tokenizer(model_dir)
    prompts = [generation_prompt(tokenizer, r["prompt"]) for _, r in rows]
    on_gpu = torch.cuda.is_available()
    model = load_causal_lm(model_dir, tokenizer, SAMPLING_ATTENTION, dtype=torch.bfloat16 if on_gpu else torch.float32)
    model.to("cuda" if on_gpu else "cpu")
    try:
        completions = generate_completions(model, tokenizer, prompts, settings.k, max_new_tokens,
                                           settings.temperature, 1.0, settings.batch_size)
    finally:
        del model  # the stage's own policy may still be on the GPU
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()
    texts = [completion_to_candidate(c) for per_prompt in completions for c in per_prompt]
    plists = [problems_from_json(r["problems"]) for _, r in rows for _ in range(settings.k)]
    judge = make_judge()
    try:
        verdicts = judge_fitting(judge.judge, texts, plists)   # as the reward judges them
        timed = bool(judge.gpu)
    except Exception as e:  # a harness failure is data here too, not the end of the stage
        verdicts = [{"status": "harness_error", "error": f"{type(e).__name__}: {e}"} for _ in texts]
        timed = False
    finally:
        judge.close()
    per_set: dict[str, dict] = {name: {} for name in row_sets}
    for i, (name, row) in enumerate(rows):
        vs = verdicts[i * settings.k:(i + 1) * settings.k]
        speeds = [v["speedup_vs_best"] for v in vs if v.get("status") == "ok" and v.get("speedup_vs_best")]
        per_set[name][row["problem_key"]] = {"statuses": dict(Counter(v.get("status") for v in vs)),
                                             "best_speedup": max(speeds) if speeds else None}
    return {name: {"model": model_dir, "k": settings.k, "timed": timed, **status_rates(per_problem),
                   "per_problem": per_problem}
            for name, per_problem in per_set.items()}


def status_rates(per_problem: dict) -> dict:
    """Parse, compile and correct rates over every completion of a probe."""
    counts = Counter()
    for entry in per_problem.values():
        counts.update(entry["statuses"])
    n = sum(counts.values()) or 1
    return {
        "completions": sum(counts.values()),
        "parse_rate": 1 - counts["parse_error"] / n,
        "compile_rate": 1 - (counts["parse_error"] + counts["compile_error"]) / n,
        "correct_rate": counts["ok"] / n,
    }


def compare_probes(before: dict, after: dict) -> dict:
    """Rates before and after. Among the problems with a verified kernel both times, the geometric mean
    of the best speedup, and on how many of them it rose."""
    out = {name: {"before": before[name], "after": after[name]} for name in ("parse_rate", "compile_rate", "correct_rate")}
    both = [(before["per_problem"][k]["best_speedup"], after["per_problem"][k]["best_speedup"])
            for k in before["per_problem"] if k in after["per_problem"]]
    verified = [(a, b) for a, b in both if a and b]
    out["problems"] = len(both)
    out["verified_both"] = len(verified)
    out["verified_before_only"] = sum(bool(a) and not b for a, b in both)
    out["verified_after_only"] = sum(bool(b) and not a for a, b in both)
    if verified:
        out["best_speedup_geomean"] = {"before": geomean([a for a, _ in verified]),
                                       "after": geomean([b for _, b in verified])}
        out["best_speedup_rose"] = sum(b > a for a, b in verified)
        out["log_change_mean"] = sum(math.log(b / a) for a, b in verified) / len(verified)
    return out


def probe_summary(before: dict | None, after: dict | None) -> dict:
    """What metrics.json carries: both probes and their comparison (or why there is none)."""
    if before is None or after is None:
        return {"prompts": 0, "note": "probe.prompts is 0: no before/after probe"}
    return {"prompts": len(before["per_problem"]), "k": before["k"], "timed": before["timed"] and after["timed"],
            "change": compare_probes(before, after), "before": before, "after": after}

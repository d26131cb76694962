"""Sample candidates for HGEMM prompts and measure how many parse, compile and pass verification.

After pretraining this gives the rate RL starts from. Compilation goes through hgemm.compile (nvcc;
a compiler failure counts against the candidate, never stops the check). With a GPU the compiled
candidates are verified by the harness (hgemm.judge, fresh random inputs, no timing); on a CPU
machine nothing is run and the summary says so.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import torch
from transformers import PreTrainedTokenizerBase

from hgemm.candidate import SpecError, parse_candidate
from hgemm.compile import compile_candidate
from hgemm.entry import EvalOptions
from hgemm.judge import KernelJudge
from hgemm.pool import VERIFY_TIMEOUT_S
from hgemm.problem import Problem
from training.model import encode_prompt, stop_token_ids
from training.prompts import completion_to_candidate, format_problem_prompt


@torch.no_grad()
def generate_completions(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    num_per_prompt: int,
    max_new_tokens: int,
    temperature: float = 0.8,
    top_p: float = 0.95,
    batch_size: int = 16,
    cache_implementation: str | None = None,
) -> list[list[str]]:
    """num_per_prompt sampled completions for each prompt (text after the prompt, cut at a stop token).
    cache_implementation: transformers' KV cache ("static", ...); None: the dynamic one."""
    model.eval()
    device = next(model.parameters()).device
    stops = stop_token_ids(tokenizer)
    limit = getattr(model.config, "max_position_embeddings", None)
    requests = [(i, encode_prompt(tokenizer, p)) for i, p in enumerate(prompts) for _ in range(num_per_prompt)]
    out: list[list[str]] = [[] for _ in prompts]
    for start in range(0, len(requests), batch_size):
        chunk = requests[start:start + batch_size]
        width = max(len(ids) for _, ids in chunk)
        new_tokens = max_new_tokens if limit is None else max(1, min(max_new_tokens, limit - width))
        # Left padding so every row's generated tokens start at the same column.
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for _, ids in chunk], device=device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for _, ids in chunk], device=device)
        generated = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=new_tokens,
            eos_token_id=stops,
            pad_token_id=pad,
            # never transformers' automatic torch.compile of a static-cache decode: each batch's prompt
            # width is another cache shape, so every batch would compile again (TRL's GRPO sets it too)
            disable_compile=True,
            **({"cache_implementation": cache_implementation} if cache_implementation else {}),
        )
        for (i, _), row in zip(chunk, generated[:, width:].tolist()):
            cut = next((j for j, t in enumerate(row) if t in stops), len(row))
            out[i].append(tokenizer.decode(row[:cut], skip_special_tokens=True))
    return out


@dataclass
class CandidateCheck:
    """What became of one sampled completion."""

    problem: str
    candidate: str
    parsed: bool
    parse_error: str | None = None
    compiled: bool | None = None  # None: not attempted (did not parse, or compiling is disabled)
    compile_error: str | None = None
    verdict: str | None = None  # the harness status on a GPU (ok, wrong, crash, ...); None: not run


def check_candidates(
    samples: list[tuple[Problem, str]],
    compile: bool = True,
    arch: str | None = None,
    workers: int | None = None,
    verify: bool | None = None,
    verify_timeout_s: float = VERIFY_TIMEOUT_S,
) -> tuple[list[CandidateCheck], dict]:
    """Parse and compile each (problem, completion), and verify the compiled ones on the GPU (verify=None:
    when one is visible; a candidate silent verify_timeout_s in verification is a `timeout`); returns the
    per-sample checks and a summary.

    A failure is recorded, never raised: a compiler crash on one candidate counts as a compile failure."""
    checks = []
    for problem, completion in samples:
        text = completion_to_candidate(completion)
        try:
            parse_candidate(text)
            checks.append(CandidateCheck(problem.key, text, True))
        except SpecError as e:
            checks.append(CandidateCheck(problem.key, text, False, parse_error=str(e)))

    compiler, compile_status = (compile_candidate, "hgemm.compile") if compile else (None, "disabled in config")
    if compiler is not None:
        todo = [(c, p) for c, (p, _) in zip(checks, samples) if c.parsed]

        def run_one(item):
            check, problem = item
            try:
                result = compiler(parse_candidate(check.candidate), layout=problem.layout, arch=arch)
                check.compiled, check.compile_error = bool(result.ok), (None if result.ok else str(result.error))
            except Exception as e:
                check.compiled, check.compile_error = False, f"{type(e).__name__}: {e}"

        # Compiles are subprocesses (nvcc) or GIL-releasing library calls, so threads overlap them.
        with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
            list(pool.map(run_one, todo))

    if verify is None:
        verify = compiler is not None and torch.cuda.is_available()
    verify_error = None
    if verify and compiler is not None:
        try:
            _verify_compiled(checks, samples, arch, verify_timeout_s)
        except Exception as e:  # the harness could not start (e.g. no pycuda): report it, keep the stage going
            verify, verify_error = False, f"{type(e).__name__}: {e}"

    n = len(checks)
    parsed = sum(c.parsed for c in checks)
    compiled = sum(bool(c.compiled) for c in checks)
    summary = {
        "samples": n,
        "checked": ("parse+compile, then verification on the GPU (harness, fresh random inputs; not timed)"
                    if verify and compiler is not None else
                    "parse+compile only; no kernel was run, so nothing was verified or timed"
                    + (f" (the harness failed to start: {verify_error})" if verify_error else "")),
        "pass_rate": (sum(c.verdict == "ok" for c in checks) / n if n else 0.0) if verify and compiler is not None else None,
        "verdicts": _top_errors(c.verdict for c in checks if c.verdict),
        "parse_rate": parsed / n if n else 0.0,
        "compile": compile_status,
        "compile_rate": (compiled / n if n else 0.0) if compiler is not None else None,
        "compile_rate_of_parsed": (compiled / parsed if parsed else 0.0) if compiler is not None else None,
        "parse_errors": _top_errors(c.parse_error for c in checks),
        "compile_errors": _top_errors(c.compile_error for c in checks),
    }
    return checks, summary


def _verify_compiled(checks: list[CandidateCheck], samples: list[tuple[Problem, str]], arch: str | None,
                     verify_timeout_s: float) -> None:
    """Run the harness's verification (no timing) on every compiled candidate, on its own problem."""
    todo = [(c, p) for c, (p, _) in zip(checks, samples) if c.compiled]
    if not todo:
        return
    with KernelJudge(EvalOptions(timing=False), gpu=True, arch=arch, verify_timeout_s=verify_timeout_s) as judge:
        verdicts = judge.judge([c.candidate for c, _ in todo], [[p] for _, p in todo])
    for (check, _), v in zip(todo, verdicts):
        check.verdict = v["status"]


def _top_errors(errors, k: int = 5) -> dict[str, int]:
    # The first line of each error, counted: enough to see why most samples fail.
    counts: dict[str, int] = {}
    for e in errors:
        if e:
            line = e.strip().splitlines()[0][:200] if e.strip() else e
            counts[line] = counts.get(line, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:k])


def sample_and_check(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    problems: list[Problem],
    num_samples: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    batch_size: int,
    compile: bool = True,
    arch: str | None = None,
    prompt_arch: str = "sm_90a",
    verify_timeout_s: float = VERIFY_TIMEOUT_S,
) -> tuple[list[dict], dict]:
    """num_samples completions spread round-robin over problems, then checked; (records, summary).
    verify_timeout_s: a candidate silent that long in verification is a `timeout` (hgemm.judge)."""
    per_problem = [num_samples // len(problems) + (i < num_samples % len(problems)) for i in range(len(problems))]
    chosen = [(p, k) for p, k in zip(problems, per_problem) if k]
    # One generate call over every problem's prompts, batched: a batch of one is launch-bound on a GPU.
    owners = [p for p, k in chosen for _ in range(k)]
    texts = generate_completions(
        model, tokenizer, [format_problem_prompt(p, arch=prompt_arch) for p in owners], 1,
        max_new_tokens, temperature, top_p, batch_size,
    )
    samples: list[tuple[Problem, str]] = [(p, t[0]) for p, t in zip(owners, texts)]
    checks, summary = check_candidates(samples, compile=compile, arch=arch, verify_timeout_s=verify_timeout_s)
    records = [dict(asdict(c), completion=t) for c, (_, t) in zip(checks, samples)]
    return records, summary

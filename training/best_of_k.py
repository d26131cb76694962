"""k candidates per evaluation shape from the final model, judged, and the best kept per shape.

Evaluation shapes are the `grid` of the settings (optionally some classes / the first N) plus every
shape rl_hgemm held out of training. With `context: true` each prompt is the one rl_hgemm trained on
(training/context.py): the problem plus the best and some weaker kernels for the nearest shapes from
rl_hgemm's kernel database and the seed library, with their measured speedups. Held-out shapes are
never shown, so a held-out prompt's context comes from training shapes only. With `context: false`
prompts are bare.

Each candidate goes through hgemm.judge.KernelJudge: with a GPU it is verified and timed against the
baselines and the fastest verified one is the shape's best; on a CPU it is only parsed and compiled,
the first compiled one is kept, and every output says nothing was timed. A seed-family render whose
launch spec does not fit its template is a `parse_error` without a compile, as in the RL rewards
(kernels_corpus.families.consistency.judge_fitting).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from hgemm.candidate import code_identity
from hgemm.entry import EvalOptions
from hgemm.files import atomic_write_text, write_json
from hgemm.judge import KernelJudge
from hgemm.library import dispatch_library
from hgemm.problem import Problem, load_grid, select_problems
from hgemm.summary import geomean
from kernels_corpus.families.consistency import judge_fitting
from training.heldout import heldout_problems
from training.kerneldb import KernelDB
from training.probe import generation_prompt
from training.prompts import completion_to_candidate, format_problem_prompt, shown_kernels

log = logging.getLogger("training.best_of_k")

# prompts, k -> k completions per prompt; `model_generator` builds the model-backed one, tests pass their own
Generate = Callable[[list[str], int], list[list[str]]]


@dataclass
class SampleSettings:
    """The `sample:` section (values: configs/default.yaml)."""

    grid: str  # evaluation shapes; rl_hgemm's held-out shapes are always added
    classes: list | None  # only these shape classes of the grid (null: all)
    limit: int | None  # only the first N grid problems (null: all)
    k: int  # candidates sampled per shape
    max_new_tokens: int
    temperature: float
    top_p: float
    batch_size: int  # sequences per generate() call
    prompt_arch: str  # the target named in the prompt
    compile_arch: str | None  # nvcc target (null: the GPU's, else sm_90a)
    reps: int  # timed repetitions when a GPU judges the candidates
    baselines: list | None  # null: the harness's default baselines
    verify_timeout_s: float  # per candidate: a hang past this is `timeout`, as in the RL stages' judges
    seed: int
    # prompts as rl_hgemm's: contrastive context from its kernel database and the seed library
    context: bool
    max_prompt_length: int  # context examples are dropped, weakest first, to fit
    context_examples: int
    nearby_shapes: int
    cache_implementation: str | None  # generation's KV cache ("static"); null: dynamic


def evaluation_problems(settings: SampleSettings, heldout: list[Problem]) -> list[tuple[Problem, bool]]:
    """(problem, is_heldout) for the grid's shapes, then held-out shapes the grid lacks."""
    problems = select_problems(load_grid(settings.grid), settings.classes, settings.limit, where=settings.grid)
    held = {p.key for p in heldout}
    out = [(p, p.key in held) for p in problems]
    seen = {p.key for p in problems}
    out += [(p, True) for p in heldout if p.key not in seen]
    return out


def best_index(verdicts: list[dict]) -> int | None:
    """The candidate to keep for a shape: the fastest verified one where a GPU timed them (highest
    speedup over the strongest baseline), else the first that compiled, else none."""
    timed = [(v.get("speedup_vs_best") or 0.0, -i) for i, v in enumerate(verdicts) if v["status"] == "ok"]
    if timed:
        return -max(timed)[1]
    return next((i for i, v in enumerate(verdicts) if v["status"] == "compiled"), None)


def model_generator(model_dir: str, settings: SampleSettings) -> Generate:
    """Generation with the saved model (bf16 on a GPU)."""
    # torch and transformers only where a model generates: a sample run with a given generator needs neither
    import torch

    from training.model import SAMPLING_ATTENTION, load_causal_lm, load_tokenizer
    from training.sampling import generate_completions

    torch.manual_seed(settings.seed)
    tokenizer = load_tokenizer(model_dir)
    on_gpu = torch.cuda.is_available()
    model = load_causal_lm(model_dir, tokenizer, SAMPLING_ATTENTION, dtype=torch.bfloat16 if on_gpu else torch.float32)
    model.to("cuda" if on_gpu else "cpu")

    def generate(prompts: list[str], k: int) -> list[list[str]]:
        completions = generate_completions(model, tokenizer, prompts, k, settings.max_new_tokens, settings.temperature,
                                           settings.top_p, settings.batch_size, settings.cache_implementation)
        # The judge's workers are other processes on this GPU, and the caching allocator would keep what
        # generation freed (the prefill's attention scores, a dynamic KV cache): 65 GiB of an 80-GiB card
        # at batch 128, too little left for the references of a large batched shape.
        if on_gpu:
            torch.cuda.empty_cache()
        return completions

    return generate


def context_prompter(settings: SampleSettings, model_dir: str, library_dir: str | None,
                     heldout: list[Problem], kernels_db: str | None = None) -> Callable[[Problem], tuple[str, int]]:
    """problem -> (prompt, context examples kept): rl_hgemm's contrastive prompt, as generate_completions
    takes it, from the kernel database rl_hgemm left beside its model (or kernels_db) and the library."""
    # the prompt builder and the tokenizer load torch and transformers
    from training.context import ContrastivePrompts
    from training.model import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    db_path = Path(kernels_db or Path(model_dir) / "kernels.sqlite")
    if not db_path.is_file():
        log.warning("no kernel database at %s: context from the library only", db_path)
    db = KernelDB(db_path if db_path.is_file() else ":memory:")
    library = dispatch_library(library_dir)
    prompts = ContrastivePrompts(db, library.measured() if library else {}, {p.key for p in heldout}, tokenizer,
                                 settings.max_prompt_length, settings.context_examples, settings.nearby_shapes,
                                 settings.prompt_arch, dispatch=library)

    def prompt(problem: Problem) -> tuple[str, int]:
        text, kept = prompts.prompt(problem)
        return generation_prompt(tokenizer, text), kept

    return prompt


def run_sample(settings: SampleSettings, generate: Generate, heldout_path: str | None, out_dir: str,
               judge=None, prompter: Callable[[Problem], tuple[str, int]] | None = None, verbatim=None) -> dict:
    """Sample, judge and keep the best per shape: writes samples.jsonl (one line per candidate),
    best/<shape key>.cu, best.json and evaluated.json into out_dir; returns the metrics.
    heldout_path: rl_hgemm's heldout.json; prompter: problem -> (prompt, context examples in it), None
    for bare prompts; verbatim (kernels_corpus.verbatim.CorpusKernels): mark the candidates that are
    corpus kernels written out again."""
    t0 = time.time()
    out = Path(out_dir)
    problems = evaluation_problems(settings, heldout_problems(heldout_path))
    prompter = prompter or (lambda p: (format_problem_prompt(p, arch=settings.prompt_arch), 0))
    prompts, context_kept = zip(*(prompter(p) for p, _ in problems))
    t_prompts = time.time()
    log.info("sampling %d candidates for each of %d shapes", settings.k, len(problems))
    completions = generate(list(prompts), settings.k)
    t_generated = time.time()
    texts = [completion_to_candidate(c) for per in completions for c in per]
    owners = [(p, held) for (p, held), per in zip(problems, completions) for _ in per]

    options = EvalOptions(reps=settings.reps)
    if settings.baselines:
        options.baselines = tuple(settings.baselines)
    judge = judge or KernelJudge(options, arch=settings.compile_arch, verify_timeout_s=settings.verify_timeout_s)
    phases_before = dict(getattr(judge, "phase_seconds", {}))
    try:
        # a family render whose launch spec does not fit its template is a parse_error, as in the RL rewards
        verdicts = judge_fitting(judge.judge, texts, [[p] for p, _ in owners])
    finally:
        judge.close()
    t_judged = time.time()
    # the judge's seconds per phase: its compiles, the GPU evaluations' phases (hgemm.evaluate.Phases:
    # references, verification, baselines' setup, timing) and the worker pool's rest (hgemm.entry.JUDGE_PHASES)
    judge_phases = {k: v - phases_before.get(k, 0.0) for k, v in getattr(judge, "phase_seconds", {}).items()}

    best_dir = out / "best"
    best_dir.mkdir(parents=True, exist_ok=True)
    records, best = [], {}
    for (p, held), per, kept, prompt in zip(problems, completions, context_kept, prompts):
        start = len(records)
        shape_verdicts = verdicts[start:start + len(per)]
        chosen = best_index(shape_verdicts)
        shown = [code_identity(k) for k in shown_kernels(prompt)]
        for j, (completion, v) in enumerate(zip(per, shape_verdicts)):
            r0 = v["results"][0] if v.get("results") else {}
            code = code_identity(texts[start + j])
            records.append({
                "problem": p.key, "shape_class": p.shape_class, "heldout": held, "index": j, "best": j == chosen,
                "context_examples": kept,
                # which of the prompt's kernels the candidate writes out again, comments and entry name aside
                # (hgemm.candidate.code_identity; 1 = the first shown, 0: none)
                "copies_example": next((i for i, k in enumerate(shown, 1) if k == code), 0),
                "examples_shown": len(shown),
                "status": v["status"], "error": (v.get("error") or "")[:2000],
                "speedup_vs_best": v.get("speedup_vs_best"), "speedup_vs_cublas": v.get("speedup_vs_cublas"),
                "time_us": r0.get("time_us"), "best_baseline": r0.get("best_baseline"),
                "candidate": texts[start + j], "completion": completion,
                "verbatim": verbatim.match(texts[start + j]) if verbatim is not None else None,
            })
        if chosen is not None:
            atomic_write_text(best_dir / f"{p.key}.cu", texts[start + chosen] + "\n")
            v = shape_verdicts[chosen]
            best[p.key] = {"problem": p.to_dict(), "heldout": held, "index": chosen, "status": v["status"],
                           "speedup_vs_best": v.get("speedup_vs_best"), "file": f"best/{p.key}.cu"}
    atomic_write_text(out / "samples.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    write_json(out / "best.json", best)
    # Every shape asked for, kept kernel or not: the bench stage benches the held-out ones regardless,
    # so a held-out shape the model failed on still counts against it.
    write_json(out / "evaluated.json", [{"problem": p.to_dict(), "heldout": held} for p, held in problems])

    t_end = time.time()
    gpu_run = judge.gpu
    statuses = Counter(r["status"] for r in records)
    n = len(records)
    parsed = n - statuses.get("parse_error", 0)
    compiled = parsed - statuses.get("compile_error", 0)
    speedups = [b["speedup_vs_best"] for b in best.values() if b.get("speedup_vs_best")]
    held_speedups = [b["speedup_vs_best"] for b in best.values() if b.get("speedup_vs_best") and b["heldout"]]
    return {
        "stage": "sample", "settings": asdict(settings), "gpu_run": gpu_run, "timed": gpu_run,
        "note": "" if gpu_run else "compiled only: no GPU, so no candidate was run, verified or timed",
        "shapes": len(problems), "heldout_shapes": sum(h for _, h in problems), "k": settings.k, "samples": n,
        "prompts": "contrastive context" if any(context_kept) else "bare",
        "prompts_with_context": sum(1 for kept in context_kept if kept),
        "statuses": dict(statuses), "parse_rate": parsed / n if n else 0.0,
        "compile_rate": compiled / n if n else 0.0,
        "correct_rate": statuses.get("ok", 0) / n if gpu_run and n else None,
        "shapes_with_best": len(best),
        "best_of_k_geomean_speedup_vs_best_baseline": geomean(speedups),
        "heldout_best_of_k_geomean_speedup_vs_best_baseline": geomean(held_speedups),
        # completions that are a corpus document's kernel, character for character (None: not checked)
        "verbatim_corpus_samples": sum(r["verbatim"] is not None for r in records) if verbatim is not None else None,
        "verbatim_corpus_best": (sum(r["verbatim"] is not None for r in records if r["best"])
                                 if verbatim is not None else None),
        **copying_metrics(records),
        "wall_s": t_end - t0,
        # where the stage's time went: building the prompts (context: library, kernel database), generating,
        # judging (compiles, verification, the candidates' and baselines' timing), writing the records
        "phase_s": {"prompts": t_prompts - t0, "generate": t_generated - t_prompts, "judge": t_judged - t_generated,
                    "records": t_end - t_judged},
        "judge_phase_s": judge_phases,
    }


def copying_metrics(records: list[dict]) -> dict:
    """How varied a shape's k samples are and what they copy from the prompt: the distinct kernels a shape
    (code identities: best of k is best of that many), the samples that write out one of the prompt's
    kernels, and the shapes where some sample writes out the last one (the shape's own fastest kernel,
    or the library's choice for an unseen shape: training/context.py). Overall and on held-out shapes."""
    out = {}
    for scope, rows in (("", records), ("heldout_", [r for r in records if r["heldout"]])):
        shapes: dict[str, list[dict]] = {}
        for r in rows:
            shapes.setdefault(r["problem"], []).append(r)
        out[f"{scope}distinct_kernels_per_shape"] = (
            sum(len({code_identity(r["candidate"]) for r in rs}) for rs in shapes.values()) / len(shapes) if shapes else None)
        out[f"{scope}samples_copying_an_example"] = sum(r["copies_example"] > 0 for r in rows)
        out[f"{scope}shapes_sampling_the_last_example"] = sum(
            any(r["examples_shown"] and r["copies_example"] == r["examples_shown"] for r in rs) for rs in shapes.values())
    return out


def sampled_kernels(samples_dir: str | Path) -> dict[str, tuple[Problem, str]]:
    """shape key -> (problem, kernel text) of a sample stage folder's best candidates (best.json, best/)."""
    samples_dir = Path(samples_dir)
    index = samples_dir / "best.json"
    best = json.loads(index.read_text()) if index.exists() else {}
    out = {}
    for key, entry in best.items():
        path = samples_dir / entry.get("file", f"best/{key}.cu")
        if path.exists():
            out[key] = (Problem.from_dict(entry["problem"]), path.read_text())
    return out

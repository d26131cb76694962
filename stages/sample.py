"""Stage: k candidates per evaluation shape from the final model, judged, and the best kept per shape.

    python -m stages.sample --config configs/default.yaml --model results/rl_hgemm \\
        --heldout results/rl_hgemm/heldout.json --library results/tune --out results/sample

Evaluation shapes are the `grid` of the config (optionally some classes / the first N) plus every shape
rl_hgemm held out of training. With `context: true` each prompt is the one rl_hgemm trained on: the
problem plus contrastive context, the best and some weaker kernels for the nearest shapes from
rl_hgemm's kernel database (--model/kernels.sqlite) and the seed library (--library), with their
measured speedups. Held-out shapes are never shown, so a held-out prompt's context comes from training
shapes only. With `context: false` prompts are bare.

Each candidate goes through hgemm.judge.KernelJudge: with a GPU it is verified and timed against the
baselines and the fastest verified one is the shape's best; on a CPU it is only parsed and compiled,
the first compiled one is kept, and every output says nothing was timed. Writes samples.jsonl (one line per candidate), best/<shape key>.cu, best.json, metrics.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from hgemm.problem import GridError, Problem, load_grid, select_problems
from hgemm.summary import geomean
from stages.common import atomic_write_text, write_json, write_metrics
from stages.config_schema import load_settings

log = logging.getLogger("stages.sample")

# prompts, k -> k completions per prompt; the model-backed one is built in main(), tests pass their own
Generate = Callable[[list[str], int], list[list[str]]]


@dataclass
class SampleSettings:
    grid: str = "configs/grids/default.yaml"
    classes: list | None = None
    limit: int | None = None
    k: int = 8
    max_new_tokens: int = 1536
    temperature: float = 0.8
    top_p: float = 0.95
    batch_size: int = 64
    prompt_arch: str = "sm_90a"
    compile_arch: str | None = None
    reps: int = 5
    baselines: list | None = None
    seed: int = 0
    # prompts as rl_hgemm's: contrastive context from its kernel database and the seed library
    context: bool = False
    max_prompt_length: int = 2560     # context examples are dropped, weakest first, to fit
    context_examples: int = 3
    nearby_shapes: int = 4
    cache_implementation: str | None = None  # generation's KV cache ("static"); null: dynamic


def heldout_problems(path: str | Path | None) -> list[Problem]:
    """Shapes named in rl_hgemm's heldout.json: its `heldout` entry when it has one (the file lists
    the training shapes too), else the whole file; problem dicts ({M, N, K, ...}) or problem keys
    ("b1_m4096_n4096_k4096_NN"), at any depth."""
    if not path or not Path(path).exists():
        return []
    found: dict[str, Problem] = {}

    def walk(node, cls: str = "heldout"):
        if isinstance(node, dict):
            if {"M", "N", "K"} <= set(node):
                p = Problem.from_dict({"shape_class": cls, **node})
                found[p.key] = p  # a full problem dict knows its shape class: it wins over a bare key
                return
            for key, value in node.items():
                if isinstance(key, str) and _is_key(key):
                    found.setdefault(key, Problem.from_key(key, cls))
                walk(value, cls)
        elif isinstance(node, list):
            for item in node:
                walk(item, cls)
        elif isinstance(node, str) and _is_key(node):
            found.setdefault(node, Problem.from_key(node, cls))

    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and "heldout" in data:
        data = data["heldout"]  # rl_hgemm also lists its training shapes beside them: never those
    walk(data)
    return list(found.values())


def _is_key(text: str) -> bool:
    try:
        Problem.from_key(text)
        return True
    except (ValueError, IndexError):
        return False


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
    """Generation with the saved model (bf16 on a GPU); imported lazily so --help stays fast."""
    import torch

    from training.model import SAMPLING_ATTENTION, load_causal_lm, load_tokenizer
    from training.sampling import generate_completions

    torch.manual_seed(settings.seed)
    tokenizer = load_tokenizer(model_dir)
    on_gpu = torch.cuda.is_available()
    model = load_causal_lm(model_dir, tokenizer, SAMPLING_ATTENTION, dtype=torch.bfloat16 if on_gpu else torch.float32)
    model.to("cuda" if on_gpu else "cpu")

    def generate(prompts: list[str], k: int) -> list[list[str]]:
        return generate_completions(model, tokenizer, prompts, k, settings.max_new_tokens, settings.temperature,
                                    settings.top_p, settings.batch_size, settings.cache_implementation)

    return generate


def context_prompter(settings: SampleSettings, model_dir: str, library_dir: str | None,
                     heldout: list[Problem], kernels_db: str | None = None) -> Callable[[Problem], tuple[str, int]]:
    """problem -> (prompt, context examples kept): rl_hgemm's contrastive prompt, as generate_completions
    takes it, from the kernel database rl_hgemm left beside its model (or kernels_db) and the library."""
    from stages.rl_hgemm import ContextSettings, ContrastivePrompts, load_library
    from training.kerneldb import KernelDB
    from training.model import load_tokenizer
    from training.probe import generation_prompt

    tokenizer = load_tokenizer(model_dir)
    db_path = Path(kernels_db or Path(model_dir) / "kernels.sqlite")
    if not db_path.is_file():
        log.warning("no kernel database at %s: context from the library only", db_path)
    db = KernelDB(db_path if db_path.is_file() else ":memory:")
    prompts = ContrastivePrompts(
        db, load_library(library_dir), {p.key for p in heldout},
        ContextSettings(examples=settings.context_examples, nearby_shapes=settings.nearby_shapes,
                        prompt_arch=settings.prompt_arch),
        tokenizer, settings.max_prompt_length)

    def prompt(problem: Problem) -> tuple[str, int]:
        text, kept = prompts.prompt(problem)
        return generation_prompt(tokenizer, text), kept

    return prompt


def run_sample(settings: SampleSettings, generate: Generate, heldout_path: str | None, out_dir: str,
               judge=None, prompter: Callable[[Problem], tuple[str, int]] | None = None) -> dict:
    """prompter: problem -> (prompt, context examples in it); None: bare prompts."""
    from hgemm.entry import EvalOptions
    from hgemm.judge import KernelJudge
    from training.prompts import completion_to_candidate, format_problem_prompt

    t0 = time.time()
    out = Path(out_dir)
    problems = evaluation_problems(settings, heldout_problems(heldout_path))
    (out / "metrics.json").unlink(missing_ok=True)  # a stale one would claim this run finished
    prompter = prompter or (lambda p: (format_problem_prompt(p, arch=settings.prompt_arch), 0))
    prompts, context_kept = zip(*(prompter(p) for p, _ in problems))
    log.info("sampling %d candidates for each of %d shapes", settings.k, len(problems))
    completions = generate(list(prompts), settings.k)
    texts = [completion_to_candidate(c) for per in completions for c in per]
    owners = [(p, held) for (p, held), per in zip(problems, completions) for _ in per]

    options = EvalOptions(reps=settings.reps)
    if settings.baselines:
        options.baselines = tuple(settings.baselines)
    judge = judge or KernelJudge(options, arch=settings.compile_arch)
    try:
        verdicts = judge.judge(texts, [[p] for p, _ in owners])
    finally:
        judge.close()

    best_dir = out / "best"
    best_dir.mkdir(parents=True, exist_ok=True)
    records, best = [], {}
    for (p, held), per, kept in zip(problems, completions, context_kept):
        start = len(records)
        shape_verdicts = verdicts[start:start + len(per)]
        chosen = best_index(shape_verdicts)
        for j, (completion, v) in enumerate(zip(per, shape_verdicts)):
            r0 = v["results"][0] if v.get("results") else {}
            records.append({
                "problem": p.key, "shape_class": p.shape_class, "heldout": held, "index": j, "best": j == chosen,
                "context_examples": kept,
                "status": v["status"], "error": (v.get("error") or "")[:2000],
                "speedup_vs_best": v.get("speedup_vs_best"), "speedup_vs_cublas": v.get("speedup_vs_cublas"),
                "time_us": r0.get("time_us"), "best_baseline": r0.get("best_baseline"),
                "candidate": texts[start + j], "completion": completion,
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
        "wall_s": time.time() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stages.sample", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True,
                    help="YAML with the sample settings, or an experiment config with a 'sample:' section")
    ap.add_argument("--model", required=True, help="final model folder (rl_hgemm output: model and tokenizer)")
    ap.add_argument("--heldout", default=None, help="rl_hgemm's heldout.json: shapes held out of training")
    ap.add_argument("--library", default=None, help="seed library folder (stages.tune output), for context")
    ap.add_argument("--kernels-db", default=None, help="kernel database for context (default: MODEL/kernels.sqlite)")
    ap.add_argument("--out", required=True,
                    help="output folder: samples.jsonl, best/, best.json, evaluated.json, metrics.json")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one setting (value parsed as YAML); repeatable")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    settings = load_settings(SampleSettings, "sample", args.config, args.overrides, ap.prog)
    if args.heldout and not Path(args.heldout).is_file():
        ap.error(f"--heldout {args.heldout}: no such file")
    try:  # a bad grid, selection or heldout.json is told before the model loads
        evaluation_problems(settings, heldout_problems(args.heldout))
    except GridError as e:
        raise SystemExit(f"{ap.prog}: {e}") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"{ap.prog}: {args.heldout}: not JSON (line {e.lineno}: {e.msg})") from None
    prompter = (context_prompter(settings, args.model, args.library, heldout_problems(args.heldout), args.kernels_db)
                if settings.context else None)
    metrics = run_sample(settings, model_generator(args.model, settings), args.heldout, args.out, prompter=prompter)
    write_metrics(args.out, metrics)
    print(f"sample: {metrics['samples']} candidates over {metrics['shapes']} shapes, statuses {metrics['statuses']}"
          f"{'' if metrics['timed'] else ' (compiled only, nothing timed)'} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

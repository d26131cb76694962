"""Contrastive prompts, as in CUDA-L1: an HGEMM problem plus the best kernel and a few weaker ones for
the nearest shapes, each shown with its measured speedup over the strongest baseline.

The kernels come from the kernel database (an RL run's verified kernels) and the seed library (its
tuned winners and the kernels the tune timed on every shape: hgemm.library.measured_kernels). Only
kernels that fit the prompt and can run its problem are chosen among (a kernel for the other layout,
or with TMA on rows the shape leaves unaligned, would be a model to copy that fails); the tuned winners
are device-header renders of 250-332 tokens, so several fit where one 2k-token reference kernel would
not. Held-out shapes are never shown.

The best example, last, is what the model copies most: on a shape the tune or the kernel database has
measured, that shape's fastest kernel. On a shape nothing has measured (a held-out shape, any shape off
the tune grid) it is the library's own choice for the shape (`hgemm.matmul`'s, by the library's
dispatch rule), shown with the speedup it measured on the nearest tuned shape that timed it, rather
than the fastest kernel of a neighbour, which can be a poor fit there (split-K on a shape with tiles
to spare, a tile that wastes most of a last wave). So the prompts of training shapes and of unseen
ones end on the same thing: the library's kernel for the prompt's shape, to copy or improve on. It
comes last whatever that speedup (the others stay weakest first), and the library it is chosen from
holds no held-out shape (`Library.without`).

rl_hgemm builds each training prompt when it is drawn (`DrawnPrompts`, a datasets transform), so the
context improves as training finds faster kernels; the sample stage prompts the final model the same
way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hgemm.candidate import Candidate, parse_candidate
from hgemm.library import Library, runs_on
from hgemm.problem import Problem
from training.grpo import prompt_prefix, prompt_tokens
from training.kerneldb import shape_distance
from training.prompts import format_problem_prompt
from training.rewards import problems_from_json

# Tokens a context example costs beyond its own text: its header line (speedup) and separators.
CONTEXT_SLACK_TOKENS = 32


@dataclass
class ContextSettings:
    """rl_hgemm's `context:` section (values: configs/default.yaml): the contrastive examples in each prompt."""

    examples: int  # the best kernel plus examples - 1 weaker ones (0: bare prompts)
    nearby_shapes: int  # how many nearest shapes to take kernels from
    use_library: bool  # the seed library's kernels as well as the kernel database's
    prompt_arch: str
    # The share of drawn training prompts that get context (the rest go bare), so that one run shows
    # both kinds: curves `correct_rate_in_context` and `correct_rate_bare`. 1.0 is CUDA-L1's setup.
    share: float
    seed: int  # for the share draw


class ContrastivePrompts:
    """Builds a problem's prompt from what `db` and `library` hold at that moment.

    library: problem key -> [(kernel text, speedup), ...] (hgemm.library.measured_kernels); {} for none.
    heldout: problem keys whose kernels are never shown.
    dispatch: the library whose choice is the best example on a shape nothing has measured; None: the
    fastest kernel of the nearest shapes instead."""

    def __init__(self, db, library: dict[str, list[tuple[str, float]]], heldout: set[str], tokenizer,
                 max_prompt_length: int, examples: int, nearby_shapes: int, prompt_arch: str,
                 dispatch: Library | None = None):
        self.db = db
        self.dispatch = dispatch.without(heldout) if dispatch is not None else None  # held-out shapes stay unseen
        self.library = {k: v for k, v in library.items() if k not in heldout}  # held-out shapes stay unseen
        self.heldout = heldout
        self.tokenizer = tokenizer
        self.max_prompt_length = max_prompt_length
        self.n_examples, self.nearby_shapes, self.prompt_arch = examples, nearby_shapes, prompt_arch
        self.prefix = prompt_prefix(tokenizer)
        self._tokens: dict[str, int] = {}  # kernel text -> token count, so each text is tokenised once
        self._candidates: dict[str, Candidate | None] = {}  # kernel text -> parsed (None: does not parse)

    def _fits(self, text: str, budget: int) -> bool:
        if text not in self._tokens:
            self._tokens[text] = prompt_tokens(self.tokenizer, text)
        return self._tokens[text] + CONTEXT_SLACK_TOKENS <= budget

    def _runs_on(self, text: str, problem: Problem) -> bool:
        """Whether the kernel can run the prompt's problem: one that cannot (another layout, TMA on
        rows this shape leaves unaligned) is a model to copy that ends `unsupported`."""
        if text not in self._candidates:
            try:
                self._candidates[text] = parse_candidate(text)
            except ValueError:  # SpecError is one
                self._candidates[text] = None
        cand = self._candidates[text]
        return cand is not None and runs_on(cand, problem)

    def _measured_here(self, problem: Problem) -> bool:
        """Whether the prompt may show a kernel measured on the problem's own shape."""
        return problem.key not in self.heldout and (problem.key in self.library or bool(self.db.top_k(problem.key, 1)))

    def _library_choice(self, problem: Problem, budget: int | None) -> tuple[str, float | None] | None:
        """(text, speedup) of the dispatch library's kernel for the problem: the speedup it measured on the
        nearest tuned shape that timed it (None where none did, as for the fallback kernel)."""
        choice = self.dispatch.lookup(problem)
        text = choice.candidate.source
        if (budget is not None and not self._fits(text, budget)) or not self._runs_on(text, problem):
            return None
        measured = sorted((d, speedup) for key, kernels in self.library.items() for t, speedup in kernels
                          if t == text and (d := shape_distance(problem, key)) is not None)
        return text, measured[0][1] if measured else None

    def examples(self, problem: Problem, budget: int | None = None) -> list[tuple[str, float | None]]:
        """(text, speedup) pairs, weakest first, best last (closest to where the answer starts; on a shape
        nothing has measured, the library's choice last). With a
        token budget, only kernels that fit it on their own are candidates, so the contrast is chosen
        among what can be shown: a kernel longer than the budget is skipped rather than leaving no
        context at all (the reference mma_pipelined.cu alone is 2155 tokens)."""
        anchor = None
        if self.dispatch is not None and self.n_examples >= 1 and not self._measured_here(problem):
            anchor = self._library_choice(problem, budget)
        pool: dict[str, tuple[str, float]] = {}  # text -> (text, speedup); the best measurement per text

        def add(text: str, speedup: float) -> None:
            if anchor is not None and text == anchor[0]:
                return
            if budget is not None and not self._fits(text, budget):
                return
            if not self._runs_on(text, problem):
                return
            if text not in pool or speedup > pool[text][1]:
                pool[text] = (text, speedup)

        for row in self.db.nearby(problem, self.nearby_shapes, exclude=self.heldout):
            add(row["text"], row["speedup_vs_best"])
        if problem.key not in self.heldout:  # a held-out shape's own records are never shown
            for row in self.db.top_k(problem.key, self.n_examples):
                add(row["text"], row["speedup_vs_best"])
        if self.library:
            near = sorted((d, k) for k in self.library if (d := shape_distance(problem, k)) is not None)
            for _, key in near[: self.nearby_shapes]:
                for text, speedup in self.library[key]:
                    add(text, speedup)
        ranked = sorted(pool.values(), key=lambda ts: -ts[1])
        slots = self.n_examples - (anchor is not None)
        if not ranked or slots < 1:
            return [anchor] if anchor else []
        rest = ranked[1:]
        want = min(len(rest), slots - 1)
        # weaker examples spread over the rest, so the contrast spans good to poor
        picks = [rest[round(i * (len(rest) - 1) / max(1, want - 1))] for i in range(want)] if want else []
        chosen = list(dict.fromkeys([ranked[0], *picks]))
        return sorted(chosen, key=lambda ts: ts[1]) + ([anchor] if anchor else [])

    def bare(self, problem: Problem) -> str:
        """The prompt without context."""
        return self.prefix + format_problem_prompt(problem, arch=self.prompt_arch)

    def prompt(self, problem: Problem) -> tuple[str, int]:
        """The prompt text and how many context examples it kept."""
        bare = prompt_tokens(self.tokenizer, self.bare(problem))
        context = self.examples(problem, budget=self.max_prompt_length - bare)
        while True:
            text = self.prefix + format_problem_prompt(problem, context=context or None, arch=self.prompt_arch)
            if prompt_tokens(self.tokenizer, text) <= self.max_prompt_length or not context:
                return text, len(context)
            context = context[1:]  # drop the weakest first


class DrawnPrompts:
    """A datasets transform: fills each row's `prompt` (and `context_examples`) from its problem when
    the row is drawn, so the kernel database's newest kernels reach the next prompts. A `share` of the
    prompts get context, the rest go bare (a seeded draw)."""

    def __init__(self, prompts: ContrastivePrompts, share: float, seed: int):
        self.prompts = prompts
        self.share = share
        self._draw = random.Random(seed)

    def __call__(self, batch: dict) -> dict:
        batch = dict(batch)
        texts, kept = [], []
        for problems in batch["problems"]:
            problem = problems_from_json(problems)[0]
            if self._draw.random() < self.share:
                text, n = self.prompts.prompt(problem)
            else:
                text, n = self.prompts.bare(problem), 0
            texts.append(text)
            kept.append(n)
        batch["prompt"] = texts
        batch["context_examples"] = kept
        return batch

"""The text a model is prompted with for a kernel problem, and the documents the corpus frames kernels in.

One prompt asks for exactly one candidate (see hgemm/candidate.py for the format):

    <|problem|>
    ...the GEMM, its shape, layout, target arch and kernel ABI...
    [optional reference kernels, each with its measured speedup]
    <|candidate|>

and the answer is the candidate text followed by `<|end|>`. Pretraining documents built from seed
kernels (kernels_corpus/harvest.py) use `format_training_example`, so the model sees this exact
framing before RL does; the tokenizer makes the three format tokens special tokens; the RL stages
prompt with `format_problem_prompt` (through training.prompts, which also cuts a completion back to
a candidate). Strings only: token-level conventions live in training/model.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from hgemm.problem import Problem

PROBLEM_TOKEN = "<|problem|>"
CANDIDATE_TOKEN = "<|candidate|>"
END_TOKEN = "<|end|>"
SPECIAL_TOKENS = (PROBLEM_TOKEN, CANDIDATE_TOKEN, END_TOKEN)

DEFAULT_ARCH = "sm_90a"

_ABI = (
    'extern "C" __global__ void <entry>(const __half* A, const __half* B, __half* C, '
    "int M, int N, int K, int batch, void* workspace"
    "[, const __grid_constant__ CUtensorMap <one per tensor_map line>])"
)


def _layout_text(problem: Problem) -> str:
    if problem.layout == "NN":
        return "NN: B is batch x K x N, row-major"
    return "TN: B is given transposed, batch x N x K, row-major"


def describe_problem(problem: Problem, arch: str = DEFAULT_ARCH) -> str:
    """The problem part of a prompt, without special tokens; short, since kernels need the context."""
    return "\n".join([
        "Write one CUDA HGEMM kernel in the candidate format: source plus a /*@launch ... @*/ spec.",
        "C[b] = A[b] @ B[b] for b < batch; fp16 in, fp32 accumulate, fp16 out; contiguous row-major.",
        f"shape: M={problem.M} N={problem.N} K={problem.K} batch={problem.batch}",
        f"A: batch x M x K; layout {_layout_text(problem)}; C: batch x M x N",
        f"target: {arch}",
        f"ABI: {_ABI}",
        "spec fields: entry, block, grid (expressions of M, N, K, batch, num_sms), smem, workspace, "
        "layouts, tensor_map",
    ])


# Kernels shown inside a prompt: the rl_hgemm contrastive examples, each with its measured speedup, and
# rl_general's seed solution. Pretraining documents use the same two framings (kernels_corpus/harvest.py),
# so that an RL prompt holding a kernel is not the first such text the model meets. Without them,
# a model pretrained only on bare prompts writes word salad (entropy 0.3 -> 2.4 nats a
# token, parse rate 0.8 -> 0) from the first rl_hgemm step whose prompt held a kernel, and on every
# rl_general prompt with the seed solution (benchmarks/in_context/README.md).
REFERENCE_INTRO = "A correct kernel for this task (its speed is not given): write a faster one."


def _fenced(text: str) -> str:
    return f"```cuda\n{text.strip()}\n```"


def _format_context(context: Sequence[tuple[str, float | None]]) -> str:
    # Each example states its speedup first, so the model reads the score before the code it scores.
    # None: not measured (pretraining documents, which are built before anything is timed).
    parts = []
    for i, (text, speedup) in enumerate(context, 1):
        score = "speed not measured" if speedup is None else f"{speedup:.2f}x the fastest baseline"
        parts.append(f"reference kernel {i}, {score}:\n{_fenced(text)}")
    return "\n".join(parts)


def shown_kernels(prompt: str) -> list[str]:
    """The kernels a prompt shows (its context examples or seed solution), in order, as `_fenced` wrote
    them: the last is the one nearest the answer."""
    return [block.split("\n```", 1)[0] for block in prompt.split("```cuda\n")[1:]]


def reference_block(text: str) -> str:
    """A general task's seed solution as rl_general shows it in the prompt (after the task text)."""
    return f"{REFERENCE_INTRO}\n{_fenced(text)}"


def format_problem_prompt(
    problem: Problem,
    context: Sequence[tuple[str, float | None]] | None = None,
    arch: str = DEFAULT_ARCH,
) -> str:
    """The prompt string for one problem; the completion that follows should be one candidate.

    context: optional (candidate_text, speedup) examples for contrastive prompts, shown in
    the order given; speedup is relative to the strongest baseline (1.0 = as fast), None if unmeasured."""
    body = describe_problem(problem, arch)
    if context:
        body += "\n" + _format_context(context)
    return f"{PROBLEM_TOKEN}\n{body}\n{CANDIDATE_TOKEN}\n"


def format_training_example(problem: Problem, candidate_text: str, arch: str = DEFAULT_ARCH,
                            context: Sequence[tuple[str, float | None]] | None = None) -> str:
    """A prompt followed by its answer, the way pretraining documents should frame a seed kernel."""
    return format_problem_prompt(problem, context, arch=arch) + candidate_text.strip() + "\n" + END_TOKEN

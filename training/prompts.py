"""The prompt format the RL stages use, and how a model's answer becomes a candidate.

The format itself (special tokens, problem descriptions, reference kernels shown in a prompt, the
prompt-then-answer documents of pretraining) is the corpus's: kernels_corpus/framing.py, whose names
this module imports for the training code. The RL stages (rl_general, rl_hgemm, sample) prompt with
`format_problem_prompt` and cut each completion back to a candidate with `completion_to_candidate`.

Token-level conventions (bos before the prompt, `<|end|>` as an extra stop token) live in
training/model.py next to the tokenizer; this module deals in strings only.
"""

from __future__ import annotations

from hgemm.candidate import extract_candidate_text
from kernels_corpus.framing import (
    CANDIDATE_TOKEN,
    END_TOKEN,
    PROBLEM_TOKEN,
    REFERENCE_INTRO,
    SPECIAL_TOKENS,
    format_problem_prompt,
    format_training_example,
    reference_block,
    shown_kernels,
)

# the corpus's format, named here for the training modules, and the cut back to a candidate
__all__ = ["CANDIDATE_TOKEN", "END_TOKEN", "PROBLEM_TOKEN", "REFERENCE_INTRO", "SPECIAL_TOKENS",
           "completion_to_candidate", "format_problem_prompt", "format_training_example", "reference_block",
           "shown_kernels"]


def completion_to_candidate(completion: str) -> str:
    """The candidate text inside a model completion.

    Cuts at the first `<|end|>` (the model may ramble on if generation was not stopped there), drops a
    stray `<|candidate|>` echo, and takes a fenced code block holding a launch spec if there is one.
    The result may still be malformed: hgemm.candidate.parse_candidate decides that."""
    text = completion.split(END_TOKEN, 1)[0]
    if CANDIDATE_TOKEN in text:
        text = text.split(CANDIDATE_TOKEN, 1)[1]
    return extract_candidate_text(text).strip()

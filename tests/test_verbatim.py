"""Which completions recite the corpus: framed answers, context kernels and raw documents, matched
after line-end and measurement-comment normalisation, and nothing else."""

from __future__ import annotations

from configured import settings
from conftest import ROOT
from hgemm.problem import Problem
from kernels_corpus.framing import format_training_example
from kernels_corpus.verbatim import CorpusKernels, normalise
from training.rewards import KernelReward, RewardSettings

MMA = (ROOT / "kernels_corpus/reference/mma_sync.cu").read_text()
NAIVE = (ROOT / "kernels_corpus/reference/naive.cu").read_text()
TILED = (ROOT / "kernels_corpus/reference/smem_tiled.cu").read_text()


def index() -> CorpusKernels:
    framed = format_training_example(Problem(64, 64, 64), "// measured on NVIDIA H200: 1.0 us, 0.50x\n" + NAIVE,
                                     context=[(TILED, 0.2)])
    return CorpusKernels([("reference/mma_sync.cu", MMA), ("tuned/b1_m64_n64_k64_NN:naive", framed)])


def test_answers_context_kernels_and_raw_documents_match_and_edits_do_not():
    kernels = index()
    assert len(kernels) == 3
    assert kernels.match(MMA) == "reference/mma_sync.cu"
    assert kernels.match(MMA.replace("\n", "   \n") + "\n\n") == "reference/mma_sync.cu"  # line ends only
    assert kernels.match(NAIVE) == "tuned/b1_m64_n64_k64_NN:naive"  # the answer, without its measurement line
    assert kernels.match("// measured on NVIDIA H200: 9.9 us, 0.10x\n" + NAIVE) is not None
    assert kernels.match(TILED) is not None  # shown in a prompt's context
    assert kernels.match(MMA.replace("128", "256", 1)) is None  # one edit: not a recital
    assert kernels.match("") is None and kernels.match("   \n") is None
    assert normalise("a  \r\nb\n") == "a\nb"


class _CpuJudge:
    gpu = False

    def judge(self, texts, plists):
        return [{"status": "compile_error", "results": []} for _ in texts]


class _NoDB:
    def record_many(self, rows):
        pass


def test_the_reward_logs_the_share_of_completions_that_recite_the_corpus():
    reward = KernelReward(_CpuJudge(), _NoDB(), settings(RewardSettings, "rl_hgemm", "reward"), "rl_hgemm",
                          verbatim=index())
    problems = '[{"M": 64, "N": 64, "K": 64}]'
    try:
        _, metrics = reward.score([MMA, MMA.replace("128", "256", 1), NAIVE, "junk"], [problems] * 4,
                                  ["b1_m64_n64_k64_NN"] * 4, ["adhoc"] * 4)
    finally:
        reward.close()
    assert metrics["kernel/verbatim_rate"] == 0.5

"""What crosses from the CPU side to a GPU worker: evaluation options and compiled candidates.

CPU-safe (no CUDA imports), so the compile-only path and the tests use it on any machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .candidate import GEMM_VARIABLES, SpecError, parse_candidate
from .compile import compile_candidate
from .sass import profile

# Input distributions of the correctness checks (hgemm.verify draws them).
DISTRIBUTIONS = ("normal", "uniform_pos", "small_int")
# Baselines (hgemm.baselines builds them); torch_compile is off by default: it takes minutes to tune.
BASELINES = ("cublas", "torch", "cublaslt", "cublaslt_tuned", "pad8_cublas", "torch_compile")
DEFAULT_BASELINES = ("cublas", "torch", "cublaslt", "cublaslt_tuned", "pad8_cublas")
# pad-to-8 cuBLAS on a shape aligned to 8 would time cuBLAS again: skipped by design, not missing
NOTHING_TO_PAD = "shape already aligned to 8"

# A GEMM candidate may keep no module-scope __device__ variables: they outlive a launch, so a kernel
# could remember what an earlier timed launch computed and skip the work. Scratch that must start at
# zero belongs in the spec's workspace, which the harness zeroes before every launch. (Task kernels may
# keep such scratch; the timing's fresh-output rotation and fresh-launch check guard them.)
STATE_ERROR = ("{} bytes of module-scope __device__ variables: a GEMM candidate may keep no state between "
               "launches (declare a workspace for scratch; the harness zeroes it before every launch)")

# How timed launches are measured (hgemm.timing): short interleaved batches at the clocks of the moment,
# or each contender held back to back for a fixed window, the regime of training-like use.
TIMING_METHODS = ("spin_batch", "sustained", "events")
# How hgemm.matmul's first-call search times a kernel (hgemm.autotune.SampledRows.time_us): launches
# queued behind a spin as spin_batch does, or replayed from a CUDA graph; the first is the default.
SEARCH_TIMERS = ("stream", "graph")

# Result classes, worst first. `compiled` is the CPU-only outcome; `harness_error` is ours, not the kernel's.
# The phases of one problem's GPU evaluation, in order (hgemm.evaluate.Phases laps them; the judge sums
# them and the RL curves log each): the inputs' float64 references, verification, the timing's set-up,
# cuBLASLt's algorithm choice, the timed batches with their checks, and what follows them.
EVAL_PHASES = ("reference", "verify", "timing_setup", "baseline_algorithms", "timed", "after_timing")
# The judge's own phases beside them (hgemm.judge.KernelJudge): its parallel compiles, and the worker
# pool's wall time outside every evaluation's phases on one GPU (worker starts and CUDA contexts, module
# loads, and the wait for a hung kernel's timeout with the replacing worker's start).
JUDGE_PHASES = ("compile", "pool_rest")
STATUSES = ("parse_error", "compile_error", "unsupported", "launch_error", "timeout", "crash", "wrong", "ok")


@dataclass
class EvalOptions:
    distributions: tuple[str, ...] = DISTRIBUTIONS
    timing: bool = True
    timing_method: str = "spin_batch"
    reps: int = 10
    target_batch_ms: float = 2.0
    baselines: tuple[str, ...] = DEFAULT_BASELINES
    torch_compile: bool = False
    recheck_sets: int = 8
    seed: int | None = None  # None: fresh inputs from os.urandom on every evaluation
    l2_factor: float = 4.0
    max_sets: int = 1024
    max_timing_bytes: int = 6 << 30
    slow_kernel_ms: float = 200.0  # a kernel slower than this per launch is timed with fewer launches
    sustained_ms: float = 200.0  # timing_method "sustained": each contender's back-to-back window
    # output rotation, per-batch sampled checks, input check and the fresh-launch guard (hgemm.rotation);
    # off only to measure what they cost
    fresh_outputs: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Entry:
    """A compiled candidate as the GPU side receives it."""

    name: str
    text: str
    cubins: dict[str, str]  # layout -> cubin path
    resources: dict = field(default_factory=dict)
    variables: tuple[str, ...] = GEMM_VARIABLES  # names the launch spec may use (a task's sizes)


def compile_entry(name: str, text: str, layouts=("NN", "TN"), arch: str | None = None,
                  variables: tuple[str, ...] = GEMM_VARIABLES, sass: bool = False) -> tuple[Entry | None, dict]:
    """Parse and compile one candidate for the layouts it supports: (Entry or None, status dict).
    A task candidate passes its task's variables and layouts=("NN",). With sass=True each layout's
    resources also get the instruction mix (hgemm.sass.profile; None without nvdisasm): tuning and
    benchmarking want it, the RL reward path does not pay for it."""
    try:
        cand = parse_candidate(text, variables)
    except SpecError as e:
        return None, {"status": "parse_error", "error": str(e)}
    cubins, resources, seconds = {}, {}, 0.0
    for layout in layouts:
        if not cand.supports(layout):
            continue
        r = compile_candidate(cand, layout, arch=arch)
        seconds += r.seconds
        if not r.ok:
            return None, {"status": "compile_error", "error": r.error, "layout": layout}
        if r.resources.gmem and tuple(variables) == GEMM_VARIABLES:
            return None, {"status": "compile_error", "layout": layout, "error": STATE_ERROR.format(r.resources.gmem)}
        cubins[layout] = r.cubin_path
        resources[layout] = asdict(r.resources)
        if sass:
            resources[layout]["sass"] = profile(r.cubin_path, cand.spec.entry)
    return Entry(name, text, cubins, resources, tuple(variables)), {"status": "compiled", "resources": resources, "compile_s": seconds}

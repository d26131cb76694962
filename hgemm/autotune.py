"""First-call search for `hgemm.matmul`: on a shape its library has no entry for, time the dispatch
rule's pick, the cost model's next best kernels, the first wgmma tiles among them in their other
form, stream-K or whole-tile, and on small outputs their first mma.sync kernel at the 32 x 32 tile,
once, on the GPU, and keep the fastest that verifies.

A dispatch rule picks one kernel for an unseen shape from the cost model's estimates, and the
estimates are often wrong by more than the kernels differ: on 46 shapes no tune saw, the best of the
model's first 8 kernels took 0.90x the rule's pick's time (benchmarks/search_headroom/shortlist.md). A
library whose table sets `autotune: K` (`hgemm merge --autotune K`) has hgemm.matmul pay for that search
once per shape and process, as cuBLASLt's algorithm search or torch.compile's max-autotune do: the
kernels compile in parallel (cached on disk across processes), each is checked on a sample of C's rows
against a float64 product, and a few milliseconds of timing on scratch inputs pick the fastest.

Each candidate is timed as the harness times it (hgemm.timing, spin_batch): a batch of launches queued
behind a spin kernel, so that they run back to back on the GPU whatever Python's launch cost, each launch
reading and writing its own scratch set of operands, as many sets as the harness rotates over (together
more than its multiple of L2, where memory allows): a kernel is ranked with its operands where the
harness times it, in DRAM. A short rotation over a few sets would leave a small problem's operands in
L2 between launches, where a kernel that waits on memory in sequence (a narrow-N walk) ranks ahead of
one that keeps more loads in flight, the reverse of the harness's order (benchmarks/autotune/).

`timer="graph"` times the same launches captured in one CUDA graph and replayed instead. A replay
skips the work the GPU's front end does for each stream launch, and that work is not the same for every
kernel: the harness timed a graph-timed search's picks 0.8-1.4 µs slower than the search did (the
median of each kind) for the short-K, skinny, narrow and mma.sync kernels and 0.9-1.9 µs for the wgmma
ones (benchmarks/autotune/search_timer/), more than two kernels of a few microseconds often differ by.
The harness's own times of the picks come from `hgemm bench` on a pinned copy of them (`hgemm pin
--autotune K`).
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple

import torch

from .candidate import parse_candidate
from .compile import compile_candidate
from .entry import SEARCH_TIMERS, EvalOptions
from .library import Choice, Library, runs_on
from .problem import Problem
from .spin import ATTEMPTS, first_spin_ns, next_batch
from .tune import (EPILOGUE_SIBLINGS, SMALL_TILE_SIBLINGS, STREAMK_SIBLINGS, TENSOR_STORE_SIBLINGS, cost_ranking,
                   epilogue_siblings, family_firsts, small_tile_siblings, streamk_siblings, tensor_store_siblings)
from .verify import check_output, random_tensor

SAMPLED_ROWS = 64  # rows of C checked against the float64 product, each whole
COLUMN_CHUNK = 2048  # columns of the float64 product at a time (bounds its memory on wide shapes)
WARMUP, LAUNCHES, REPS = 2, 20, 3  # a candidate's time: the lowest of REPS batches' means
TIMING_BYTES = 2 << 30  # the scratch sets: at most this, and a quarter of the GPU's free memory
SPIN_CYCLES_PER_NS = 2  # the spin's length in SM clock cycles a nanosecond: H100 and H200 run at most 1.98 GHz

Run = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]  # run(a, b, c): launch on the current stream


class Search(NamedTuple):
    """A first-call search's outcome: the kept kernel, every kernel searched (the rule's pick first), and
    per searched kernel its µs or why it was dropped."""

    best: Choice
    searched: list[Choice]
    found: dict[str, float | str]


def candidates(library: Library, problem: Problem, first: Choice, top: int) -> list[Choice]:
    """The dispatch rule's pick, then the cost model's first `top` kernels that can run the problem,
    then the first hgemm.tune.STREAMK_SIBLINGS wgmma tiles among them in their other form, stream-K or
    whole-tile, where stream-K applies (hgemm.tune.streamk_siblings: the cost model ranks only the
    kernels its tunes timed, which may hold no stream-K kernel), and on small outputs the first mma.sync
    kernel among them at the 32 x 32 tile (hgemm.tune.small_tile_siblings), the first two-consumer
    wgmma kernels with the other of the parked and bulk-copy epilogues (hgemm.tune.epilogue_siblings), and
    the first parked or bulk-copy wgmma kernels with the TMA tensor stores of C
    (hgemm.tune.tensor_store_siblings); last, the cost model's first
    kernel of each family that applies and has none searched so far (hgemm.tune.family_firsts)."""
    out = [first]
    ranked = cost_ranking(problem, library)
    for name, text in ranked[:top]:
        if name != first.name:
            cand = parse_candidate(text)
            if runs_on(cand, problem):
                out.append(Choice(name, cand, f"autotune {first.how}"))
    names = [c.name for c in out]
    for siblings, count in ((streamk_siblings(names, problem), STREAMK_SIBLINGS),
                            (small_tile_siblings(names, problem), SMALL_TILE_SIBLINGS),
                            (epilogue_siblings(names, problem), EPILOGUE_SIBLINGS),
                            (tensor_store_siblings(names, problem), TENSOR_STORE_SIBLINGS),
                            (family_firsts(ranked, names), len(ranked))):
        # (a kernel may be the sibling of two kinds: the parked twin of a bulk kernel is a stream-K
        # kernel's whole tile too)
        searched = {c.name for c in out}
        runnable = [(name, cand) for name, text in siblings
                    if name not in searched and runs_on(cand := parse_candidate(text), problem)]
        out += [Choice(name, cand, f"autotune {first.how}") for name, cand in runnable[:count]]
    return out


def compile_all(pairs: list[tuple[Choice, str]]) -> None:
    """Compile every (candidate, layout) in parallel (nvcc runs apart from Python), filling the disk
    cache that the op's loader reads."""
    unique = list({(ch.name, layout): (ch, layout) for ch, layout in pairs}.values())
    with ThreadPoolExecutor(max_workers=max(1, min(len(unique), os.cpu_count() or 1))) as pool:
        list(pool.map(lambda pair: compile_candidate(pair[0].candidate, pair[1]), unique))


def set_count(set_bytes: int, l2_bytes: int, room: int) -> int:
    """Scratch sets a search's timed launches rotate over: as many as the harness's input sets (enough
    that together they exceed its l2_factor x L2, at most its max_sets), as far as `room` bytes hold them;
    one at least."""
    harness = EvalOptions()
    want = math.ceil(harness.l2_factor * l2_bytes / set_bytes)
    return max(1, min(want, harness.max_sets, room // set_bytes))


class SampledRows:
    """Scratch operands of a problem and the float64 product of SAMPLED_ROWS random rows of C."""

    def __init__(self, problem: Problem, device, seed: int = 0):
        gen = self.gen = torch.Generator(device=device).manual_seed(seed)  # never the caller's global RNG
        self.problem = problem
        self.a = random_tensor(problem.a_shape, "normal", gen, device)
        self.b = random_tensor(problem.b_shape, "normal", gen, device)
        self.c = torch.empty(problem.c_shape, dtype=torch.float16, device=device)
        rows = problem.batch * problem.M
        sampled = torch.randperm(rows, generator=gen, device=device)[:min(SAMPLED_ROWS, rows)]
        self.batch_idx, self.row_idx = sampled // problem.M, sampled % problem.M
        self.ref = torch.empty((len(sampled), problem.N), dtype=torch.float64, device=device)
        self.absprod = torch.empty_like(self.ref)
        for entry in self.batch_idx.unique().tolist():
            at = (self.batch_idx == entry).nonzero()[:, 0]
            rows = self.a[entry, self.row_idx[at]].double()  # (samples in this entry, K)
            b = self.b[entry] if problem.layout == "NN" else self.b[entry].t()  # K x N
            for lo in range(0, problem.N, COLUMN_CHUNK):
                cols = b[:, lo:lo + COLUMN_CHUNK].double()
                self.ref[at, lo:lo + COLUMN_CHUNK] = rows @ cols
                self.absprod[at, lo:lo + COLUMN_CHUNK] = rows.abs() @ cols.abs()

    def check(self, run: Run) -> str:
        """'' when run writes C right on the sampled rows, else what is wrong."""
        self.c.view(torch.int16).fill_(0x7E00)  # NaN: a row the kernel did not write shows
        run(self.a, self.b, self.c)
        if self.c.is_cuda:
            torch.cuda.synchronize()
        got = self.c[self.batch_idx, self.row_idx]
        report = check_output(got, self.ref, self.absprod, self.problem.K)
        return "" if report.ok else report.detail

    def timing_sets(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(a, b, c) sets the timed launches rotate over (set_count); the first is the checked one."""
        if not hasattr(self, "_sets"):
            p = self.problem
            l2 = torch.cuda.get_device_properties(self.a.device).L2_cache_size
            free = torch.cuda.mem_get_info(self.a.device)[0]  # the caller's own tensors come first
            n = set_count(p.min_bytes, l2, min(TIMING_BYTES, free // 4))
            self._sets = [(self.a, self.b, self.c)] + [
                (random_tensor(p.a_shape, "normal", self.gen, self.a.device),
                 random_tensor(p.b_shape, "normal", self.gen, self.a.device), torch.empty_like(self.c))
                for _ in range(n - 1)]
        return self._sets

    def time_us(self, run: Run, timer: str = SEARCH_TIMERS[0]) -> float:
        """µs a launch: a launch a set (LAUNCHES at least, over the sets in turn, so that a set comes
        round again only after every other), the lowest mean of REPS batches; `timer`
        (hgemm.entry.SEARCH_TIMERS) says how the launches run back to back: queued behind a spin, or
        replayed from a CUDA graph."""
        sets = self.timing_sets()
        launches = max(LAUNCHES, len(sets))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the caller's stream goes on; warm-up: loads, smem opt-ins, allocations
            for i in range(max(WARMUP, len(sets))):  # every set once: a launcher's per-set allocations
                run(*sets[i % len(sets)])
            best = self._stream_us(run, sets, launches) if timer == "stream" else self._graph_us(run, sets, launches)
        torch.cuda.current_stream().wait_stream(side)
        return best

    @staticmethod
    def _stream_us(run: Run, sets: list, launches: int) -> float:
        """The harness's spin_batch on the current stream: a spin kernel holds the stream while the host
        enqueues a batch, then the batch runs back to back between two events. A batch whose start event
        had passed before the host finished enqueueing it (starved: launch gaps in the figure) is taken
        again with a longer spin, or with fewer launches (hgemm.spin.next_batch); past ATTEMPTS extra
        batches the starved figures stand, an upper bound."""
        spin_ns, best, starved_best, kept = first_spin_ns(launches), math.inf, math.inf, 0
        for _ in range(REPS + ATTEMPTS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(spin_ns * SPIN_CYCLES_PER_NS)
            start.record()
            began = time.perf_counter()
            for i in range(launches):
                run(*sets[i % len(sets)])
            host_s = time.perf_counter() - began
            end.record()
            starved = start.query()
            end.synchronize()
            us = start.elapsed_time(end) * 1e3 / launches
            if starved:
                starved_best = min(starved_best, us)
            else:
                best, kept = min(best, us), kept + 1
                if kept == REPS:
                    break
            spin_ns, launches = next_batch(spin_ns, launches, host_s, starved)
        return best if kept else starved_best

    @staticmethod
    def _graph_us(run: Run, sets: list, launches: int) -> float:
        """The launches captured in one CUDA graph and timed on replay."""
        graph = torch.cuda.CUDAGraph()
        # thread_local: the caller's other threads may go on using the GPU while this one captures
        with torch.cuda.graph(graph, stream=torch.cuda.current_stream(), capture_error_mode="thread_local"):
            for i in range(launches):
                run(*sets[i % len(sets)])
        graph.replay()
        best = math.inf
        for _ in range(REPS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) * 1e3 / launches)
        return best


def pick(problem: Problem, choices: list[Choice], launcher: Callable[[Choice], Run], device,
         timer: str = SEARCH_TIMERS[0]) -> Search:
    """The fastest of `choices` that verifies (the first if none does), and per candidate its time in µs
    (SampledRows.time_us by `timer`) or why it was dropped. launcher(choice) loads the kernel and
    returns its launch."""
    compile_all([(ch, problem.layout) for ch in choices])
    scratch = SampledRows(problem, device)
    found: dict[str, float | str] = {}
    for choice in choices:
        try:
            run = launcher(choice)
        except RuntimeError as e:  # failed to compile or load: the kernel is dropped, the op goes on
            found[choice.name] = f"not loaded: {e}"
            continue
        wrong = scratch.check(run)
        if wrong:
            found[choice.name] = f"wrong: {wrong}"
            continue
        try:
            found[choice.name] = scratch.time_us(run, timer)
        except RuntimeError as e:  # a launch that failed, or one a graph could not capture: dropped, the op goes on
            found[choice.name] = f"not timed: {e}"
    timed = [(t, i) for i, ch in enumerate(choices) if isinstance(t := found[ch.name], float)]
    return Search(choices[min(timed)[1]] if timed else choices[0], choices, found)

"""Kernel timing: what the GPU spends, not what Python spends dispatching.

Method `spin_batch` (the default), per contender and repetition:

    synchronise
    spin kernel (holds the stream for longer than the host needs to enqueue the batch)
    start event
    n launches, rotating over buffer sets larger than 4x L2 in total (cold L2)
    device-wide synchronise        <- any work the launches left anywhere on the device is counted
    end event
    time = (end - start - calibrated sync overhead) / n

Because the launches queue up behind the spin kernel, they run back to back whatever the Python
dispatch cost is; a batch where the spin ended before the host finished enqueueing is detected (the
start event had already completed) and repeated with a longer spin. The sync overhead (host wake-up
and end-event record, a few to tens of microseconds) is measured with empty batches and subtracted;
batches last milliseconds, so its noise is small. Contenders are interleaved: each repetition times
every contender once, in a rotated order, so clock drift and thermal state affect them alike.

Method `events` (for comparison, and in tests): one event pair around each launch.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import pycuda.driver as cuda

from .runtime import KernelLaunchError, Utilities, is_sticky, synchronize

METHODS = ("spin_batch", "events")


@dataclass
class TimingStats:
    median_us: float
    min_us: float
    p10_us: float
    p90_us: float
    reps: int
    launches_per_rep: int
    method: str

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the noise band of this measurement."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spread"] = self.spread
        return d


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(samples_us: list[float], launches: int, method: str) -> TimingStats:
    return TimingStats(statistics.median(samples_us), min(samples_us), _quantile(samples_us, 0.1),
                       _quantile(samples_us, 0.9), len(samples_us), launches, method)


class Timer:
    """Times contenders: callables f(i) that enqueue one run on buffer set i (on the default stream)."""

    def __init__(self, utilities: Utilities, n_sets: int, reps: int = 10, target_batch_ms: float = 2.0,
                 max_launches: int = 1000, method: str = "spin_batch"):
        if method not in METHODS:
            raise ValueError(f"unknown timing method {method!r} (known: {METHODS})")
        self.util = utilities
        self.n_sets = max(1, n_sets)
        self.reps = reps
        self.target_batch_ms = target_batch_ms
        self.max_launches = max_launches
        self.method = method
        self.start, self.end = cuda.Event(), cuda.Event()
        self.overhead_us = self._calibrate() if method == "spin_batch" else 0.0

    # -- spin_batch -------------------------------------------------------------------------
    def _batch_us(self, fn: Callable[[int], None] | None, n: int, offset: int, spin_ns: int) -> tuple[float, float, bool]:
        """One batch: (device microseconds, host enqueue seconds, starved)."""
        synchronize()
        self.util.spin(spin_ns)
        self.start.record()
        t0 = time.perf_counter()
        if fn is not None:
            for j in range(n):
                fn((offset + j) % self.n_sets)
        host_s = time.perf_counter() - t0
        starved = self.start.query()  # the spin already ended: launches may have run with gaps
        synchronize()
        self.end.record()
        self.end.synchronize()
        return self.end.time_since(self.start) * 1e3, host_s, starved

    def _calibrate(self) -> float:
        samples = [self._batch_us(None, 0, 0, 20_000)[0] for _ in range(15)]
        return statistics.median(samples[3:])

    def _plan(self, fn: Callable[[int], None]) -> int:
        """Launches per batch so that one batch lasts about target_batch_ms."""
        for i in range(2):  # warm-up: module load, lazy allocations, cuBLAS heuristics
            fn(i % self.n_sets)
        # the estimate itself runs behind a spin, so a library's slow Python dispatch does not inflate it
        us, _, _ = self._batch_us(fn, 3, 0, 2_000_000)
        est_ms = max((us - self.overhead_us) / 3e3, 1e-4)
        return max(1, min(self.max_launches, math.ceil(self.target_batch_ms / est_ms)))

    def time_interleaved(self, contenders: dict[str, Callable[[int], None]]) -> dict[str, TimingStats]:
        if self.method == "events":
            return {name: self.time_events(fn) for name, fn in contenders.items()}
        names = list(contenders)
        plan = {name: self._plan(contenders[name]) for name in names}
        spin_ns = {name: 200_000 + 40_000 * plan[name] for name in names}  # generous first guess
        samples: dict[str, list[float]] = {name: [] for name in names}
        offset = 0
        for rep in range(self.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                n = plan[name]
                for _attempt in range(4):
                    us, host_s, starved = self._batch_us(contenders[name], n, offset, spin_ns[name])
                    # next time spin 50% longer than this enqueue took, plus slack
                    spin_ns[name] = int(max(spin_ns[name] * (2 if starved else 1), host_s * 1.5e9 + 50_000))
                    if not starved:
                        break
                samples[name].append(max(us - self.overhead_us, 0.0) / n)
                offset += n
        return {name: summarize(samples[name], plan[name], "spin_batch") for name in names}

    # -- events ---------------------------------------------------------------------------------
    def time_events(self, fn: Callable[[int], None]) -> TimingStats:
        for i in range(2):
            fn(i % self.n_sets)
        samples = []
        for r in range(max(self.reps, 10)):
            synchronize()
            self.start.record()
            fn(r % self.n_sets)
            self.end.record()
            self.end.synchronize()
            samples.append(self.end.time_since(self.start) * 1e3)
        return summarize(samples, 1, "events")


def tracked(launches: list[Callable[[], None]]) -> tuple[Callable[[int], None], set[int]]:
    """A contender f(i) over per-set launchers, and the set of indices it ran: the re-check after
    timing looks only at buffer sets the timed runs actually wrote."""
    touched: set[int] = set()

    def run(i: int) -> None:
        touched.add(i)
        launches[i]()

    return run, touched


def single_launch_us(fn: Callable[[], None]) -> float:
    """Rough duration of one call (used to budget slow kernels and to size batches)."""
    start, end = cuda.Event(), cuda.Event()
    synchronize()
    start.record()
    fn()
    end.record()
    try:
        end.synchronize()
    except cuda.Error as e:
        raise KernelLaunchError(str(e), is_sticky(e)) from None
    return end.time_since(start) * 1e3

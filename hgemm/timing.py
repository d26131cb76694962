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
start event had already completed) and repeated with a longer spin, up to a bound past which the batch
is halved instead (hgemm.spin: a host whose enqueue waits for the GPU is starved whatever the spin).
The sync overhead (host wake-up and end-event record, a few to tens of microseconds) is measured with
empty batches and subtracted; batches last milliseconds, so its noise is small. Contenders are
interleaved: each repetition times every contender once, in a rotated order, so clock drift and
thermal state affect them alike.

Method `sustained` (the regime of training-like use): each contender runs back to back for a fixed
wall time (EvalOptions.sustained_ms) in sub-batches separated by events, with no spin and no
synchronisation between them, so the GPU settles at the clocks it can hold; the first quarter of the
sub-batches is dropped as ramp-up. A contender whose launches the host cannot enqueue as fast as the
GPU runs them is marked `host_bound` (the figure then includes idle gaps), as is a spin_batch contender
with a batch kept though starved.

Method `events` (for comparison, and in tests): one event pair around each launch.

Every method records the GPU's clocks and throttle reasons around each contender's batches (hgemm.clocks):
for spin_batch one reading before and one after each repetition, which brackets every contender's batch
of it; for sustained and events, before and after each contender's run. NVML's power and thermal
capping time is counted over those spans. Where the caller asks, a check runs after each batch, outside
the timed region (the evaluator checks there the outputs the batch wrote).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import pycuda.driver as cuda

from .clocks import ClockLog, ClockProbe
from .entry import TIMING_METHODS, EvalOptions
from .runtime import KernelLaunchError, Utilities, is_sticky, synchronize
from .spin import ATTEMPTS, first_spin_ns, next_batch

RECALIBRATE_S = 30.0
SUSTAINED_SUB_MS = 5.0  # one sub-batch: long against event resolution, short against the window


@dataclass
class TimingStats:
    median_us: float
    min_us: float
    p10_us: float
    p90_us: float
    reps: int
    launches_per_rep: int
    method: str
    clocks: dict | None = None
    host_bound: bool = False

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


def summarize(samples_us: list[float], launches: int, method: str, clocks: ClockLog | None = None,
              host_bound: bool = False) -> TimingStats:
    return TimingStats(statistics.median(samples_us), min(samples_us), _quantile(samples_us, 0.1),
                       _quantile(samples_us, 0.9), len(samples_us), launches, method,
                       clocks.summary() if clocks else None, host_bound)


AfterBatch = Callable[[str, bool], None]  # (contender, whether this was its last batch)


class Timer:
    """Times contenders: callables f(i) that enqueue one run on buffer set i (on the default stream).

    `after_batch(name, last)`, when given, runs after each of a contender's batches has finished and
    before the next starts, outside every timed region; `last` marks the contender's final batch, the
    moment to check everything its timed runs left (the next contender may overwrite shared outputs)."""

    def __init__(self, utilities: Utilities, n_sets: int, reps: int = 10, target_batch_ms: float = 2.0,
                 max_launches: int = 1000, method: str = "spin_batch", clocks: ClockProbe | None = None,
                 sustained_ms: float = EvalOptions.sustained_ms):
        if method not in TIMING_METHODS:
            raise ValueError(f"unknown timing method {method!r} (known: {TIMING_METHODS})")
        self.util = utilities
        self.n_sets = max(1, n_sets)
        self.reps = reps
        self.target_batch_ms = target_batch_ms
        self.max_launches = max_launches
        self.method = method
        self.clocks = clocks
        self.sustained_ms = sustained_ms
        self.start, self.end = cuda.Event(), cuda.Event()
        self.overhead_us = self._sync_overhead_us() if method != "events" else 0.0

    def _read_clocks(self) -> dict | None:
        return self.clocks.read() if self.clocks is not None else None

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

    def _sync_overhead_us(self) -> float:
        """The calibrated sync overhead, measured again once it is older than RECALIBRATE_S: a property
        of the host and driver, not of the contenders, so evaluations in a row share one measurement."""
        stamp = getattr(self.util, "sync_overhead", None)
        if stamp is None or time.monotonic() - stamp[1] > RECALIBRATE_S:
            stamp = self.util.sync_overhead = (self._calibrate(), time.monotonic())
        return stamp[0]

    def _calibrate(self) -> float:
        samples = [self._batch_us(None, 0, 0, 20_000)[0] for _ in range(15)]
        return statistics.median(samples[3:])

    def _plan(self, fn: Callable[[int], None], target_ms: float | None = None) -> int:
        """Launches per batch so that one batch lasts about target_ms (default target_batch_ms)."""
        for i in range(2):  # warm-up: module load, lazy allocations, cuBLAS heuristics
            fn(i % self.n_sets)
        # the estimate itself runs behind a spin, so a library's slow Python dispatch does not inflate it
        spin_ns = 300_000
        for _attempt in range(4):
            us, _, starved = self._batch_us(fn, 3, 0, spin_ns)
            if not starved:
                break
            spin_ns *= 4
        est_ms = max((us - self.overhead_us) / 3e3, 1e-4)
        return max(1, min(self.max_launches, math.ceil((target_ms or self.target_batch_ms) / est_ms)))

    def time_interleaved(self, contenders: dict[str, Callable[[int], None]],
                         after_batch: AfterBatch | None = None) -> dict[str, TimingStats]:
        if self.method == "events":
            return {name: self.time_events(fn, name, after_batch) for name, fn in contenders.items()}
        if self.method == "sustained":
            return self.time_sustained(contenders, after_batch)
        names = list(contenders)
        plan = {name: self._plan(contenders[name]) for name in names}
        spin_ns = {name: first_spin_ns(plan[name]) for name in names}  # generous first guess
        samples: dict[str, list[float]] = {name: [] for name in names}
        gaps = {name: False for name in names}  # a batch kept though starved: launch gaps in the figure
        logs = {name: ClockLog() for name in names}
        offset = 0
        for rep in range(self.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            before = self._read_clocks()  # one reading brackets every contender's batch of this repetition
            for name in order:
                for _attempt in range(ATTEMPTS):
                    n, spin = plan[name], spin_ns[name]
                    us, host_s, starved = self._batch_us(contenders[name], n, offset, spin)
                    spin_ns[name], plan[name] = next_batch(spin, n, host_s, starved)
                    if not starved or (spin_ns[name], plan[name]) == (spin, n):  # or nothing left to change
                        break
                gaps[name] |= starved
                samples[name].append(max(us - self.overhead_us, 0.0) / n)
                offset += n
                if after_batch is not None:
                    after_batch(name, rep == self.reps - 1)
            after = self._read_clocks()
            for name in names:
                logs[name].around(before, after)
        return {name: summarize(samples[name], plan[name], "spin_batch", logs[name], gaps[name]) for name in names}

    # -- sustained ------------------------------------------------------------------------------
    def time_sustained(self, contenders: dict[str, Callable[[int], None]],
                       after_batch: AfterBatch | None = None) -> dict[str, TimingStats]:
        """Each contender back to back for sustained_ms, one after another (the window is the point:
        interleaving would let the GPU cool between contenders)."""
        out = {}
        offset = 0
        for name, fn in contenders.items():
            per_sub = self._plan(fn, SUSTAINED_SUB_MS)
            subs = max(4, math.ceil(self.sustained_ms / SUSTAINED_SUB_MS))
            events = [cuda.Event() for _ in range(subs + 1)]
            log = ClockLog()
            before = self._read_clocks()
            synchronize()
            self.util.spin(200_000)  # the host gets ahead of the GPU before the first sub-batch
            t0 = time.perf_counter()
            done = 0
            for s in range(subs):
                events[s].record()
                for j in range(per_sub):
                    fn((offset + j) % self.n_sets)
                offset += per_sub
                done = s + 1
                # a host that enqueues slower than the GPU runs would stretch the window: stop at its length
                if done >= 4 and time.perf_counter() - t0 > self.sustained_ms / 1e3:
                    break
            events[done].record()
            host_s = time.perf_counter() - t0
            events[done].synchronize()
            log.around(before, self._read_clocks())
            gpu_ms = events[done].time_since(events[0])
            samples = [events[s + 1].time_since(events[s]) * 1e3 / per_sub for s in range(done)]
            kept = samples[done // 4:]
            # the GPU outran the enqueue: launches waited on the host, so gaps are in the figure
            host_bound = host_s * 1e3 > 0.9 * gpu_ms
            out[name] = summarize(kept, per_sub, "sustained", log, host_bound)
            if after_batch is not None:
                after_batch(name, True)
        return out

    # -- events ---------------------------------------------------------------------------------
    def time_events(self, fn: Callable[[int], None], name: str = "", after_batch: AfterBatch | None = None) -> TimingStats:
        for i in range(2):
            fn(i % self.n_sets)
        samples = []
        log = ClockLog()
        before = self._read_clocks()
        for r in range(max(self.reps, 10)):
            synchronize()
            self.start.record()
            fn(r % self.n_sets)
            self.end.record()
            self.end.synchronize()
            samples.append(self.end.time_since(self.start) * 1e3)
        log.around(before, self._read_clocks())
        if after_batch is not None:
            after_batch(name, True)
        return summarize(samples, 1, "events", log)


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


def queued_launch_us(util: Utilities, fn: Callable[[], None], spin_ns: int = 200_000) -> float:
    """Device time of one call, queued behind a spin kernel so that the event pair holds the kernel and
    not the host's launch latency (tens of us from Python): the fresh-launch guard compares this with
    the timed median. Whatever fn enqueues before its launch (a poisoning fill) belongs before the call."""
    start, end = cuda.Event(), cuda.Event()
    for _attempt in range(4):
        util.spin(spin_ns)
        start.record()
        fn()
        end.record()
        starved = start.query()  # the spin ended before the launch was queued: latency in the figure
        try:
            end.synchronize()
        except cuda.Error as e:
            raise KernelLaunchError(str(e), is_sticky(e)) from None
        if not starved:
            break
        spin_ns *= 4
    return end.time_since(start) * 1e3

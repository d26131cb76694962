"""The spin ahead of a timed batch (hgemm.timing, method spin_batch): how long it lasts, and how many
launches the batch holds. Pure arithmetic, apart from the GPU so that it is tested anywhere.

A batch is starved when its spin ends before the host has enqueued it (launch gaps would then be in
the figure). A slow host needs a longer spin: twice as long, or 50% longer than the enqueue took.
A host whose enqueue waits for the GPU (the driver's launch queue is full, as for a contender that
queues several operations per call) is starved however long the spin: its enqueue lasts as long as
the spin. Doubling the spin for it every time grows without end (minutes a batch after a few
repetitions), so the spin stops at SPIN_MAX_NS and a batch starved behind that is halved instead.
"""

from __future__ import annotations

SPIN_BASE_NS = 200_000
SPIN_PER_LAUNCH_NS = 40_000  # several times what a launch from Python costs: the first guess
SPIN_MAX_NS = 100_000_000  # 1,000 launches (the timer's most) at 100 us each
ATTEMPTS = 8  # batches one sample may take: the spin doubling to its bound, then the halvings


def first_spin_ns(n: int) -> int:
    """The spin a batch of n launches starts with: generous, so that a fast host is never starved."""
    return min(SPIN_MAX_NS, SPIN_BASE_NS + SPIN_PER_LAUNCH_NS * n)


def next_batch(spin_ns: int, n: int, host_s: float, starved: bool) -> tuple[int, int]:
    """(spin, launches) for a contender's next batch after one that took host_s seconds to enqueue.
    The spin ends before the start event, so its length changes only the wall time, never the figure."""
    enqueue_ns = int(host_s * 1.5e9 + 50_000)
    if not starved:
        return min(SPIN_MAX_NS, enqueue_ns), n
    if spin_ns >= SPIN_MAX_NS and n > 1:
        return SPIN_MAX_NS, n // 2
    return min(SPIN_MAX_NS, max(spin_ns * 2, enqueue_ns)), n

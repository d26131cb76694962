"""The spin ahead of a timed batch (hgemm.spin) on a model of the host and the driver's launch queue:
the host enqueues ops_per_call operations a launch at op_launch_s each; the queue holds `queue` of
them, and once it is full the host waits for the GPU, which starts only when the spin ends."""

from hgemm.spin import ATTEMPTS, SPIN_MAX_NS, first_spin_ns, next_batch


def _batch(spin_ns: int, n: int, ops_per_call: int, op_launch_s: float, queue: int, op_gpu_s: float = 2e-6):
    """(host enqueue seconds, starved) of one batch in the model."""
    ops = n * ops_per_call
    host_s = ops * op_launch_s
    if ops > queue:  # the host waits until the spin ends and the GPU has drained what does not fit
        host_s = max(host_s, spin_ns * 1e-9 + (ops - queue) * op_gpu_s)
    return host_s, host_s > spin_ns * 1e-9


def _time(n: int, reps: int, **model) -> tuple[float, int, int]:
    """The timing loop's attempts (ATTEMPTS a sample): (seconds spent spinning, the last
    batch's launches, starved batches kept)."""
    spin = first_spin_ns(n)
    spun, kept_starved = 0.0, 0
    for _rep in range(reps):
        for _attempt in range(ATTEMPTS):
            spun += spin * 1e-9
            host_s, starved = _batch(spin, n, **model)
            before = (spin, n)
            spin, n = next_batch(spin, n, host_s, starved)
            if not starved or (spin, n) == before:
                break
        kept_starved += starved
    return spun, n, kept_starved


def test_a_batch_the_launch_queue_cannot_hold_is_halved_not_spun_for_minutes():
    # 1,000 launches of a contender that queues 4 operations a call into a queue of 1,024: doubling
    # the spin on every starved batch would spin ~2^40 x 40 ms over 10 repetitions
    spun, n, kept_starved = _time(1000, 10, ops_per_call=4, op_launch_s=5e-6, queue=1024)
    assert n * 4 <= 1024
    assert kept_starved == 0
    assert spun < 1.0


def test_a_slow_host_gets_a_longer_spin_and_keeps_its_batch():
    # padding copies and a GEMM, ~50 us of Python a call: the first guess (40 us a launch) starves once
    spun, n, kept_starved = _time(200, 10, ops_per_call=4, op_launch_s=12.5e-6, queue=10**6)
    assert n == 200 and kept_starved == 0


def test_the_spin_follows_the_enqueue_and_never_passes_its_bound():
    assert next_batch(first_spin_ns(100), 100, 1e-3, starved=False) == (1_550_000, 100)
    assert next_batch(1_000_000, 100, 1.0, starved=False) == (SPIN_MAX_NS, 100)
    assert next_batch(1_000_000, 100, 2e-3, starved=True) == (3_050_000, 100)
    assert next_batch(SPIN_MAX_NS, 100, 9.0, starved=True) == (SPIN_MAX_NS, 50)
    assert next_batch(SPIN_MAX_NS, 1, 9.0, starved=True) == (SPIN_MAX_NS, 1)
    assert first_spin_ns(10**6) == SPIN_MAX_NS


def test_a_contender_that_waits_for_the_gpu_on_every_call_costs_a_bounded_spin():
    # no queue at all (the call synchronises): starved whatever the spin and the batch, and so marked
    spun, n, kept_starved = _time(200, 10, ops_per_call=1, op_launch_s=10e-6, queue=0)
    assert n == 1 and kept_starved == 10
    assert spun < 2.0

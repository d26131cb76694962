"""Timed launches that cannot profit from what an earlier launch left behind.

A timed kernel runs many times on the same few buffer sets. If launch k on set i wrote into the same
output that an earlier launch on set i filled, a kernel could see that the output already holds its
answer (or remember the pointers, or keep a copy) and skip the work; the re-check after timing would
pass, since the buffers hold the right result. The harness closes that class of shortcut:

- outputs rotate apart from inputs: there is one more output than input sets (the outputs shared by
  a problem's candidates, each candidate with a workspace of its own per output), and each launch
  writes into the least recently used output whose content is the product of a *different* input
  set. Whatever a launch finds in its output or workspace is another problem's answer, so skipping or
  copying leaves a wrong result;
- after every timed batch, outside the timed region, each output the batch wrote is checked at random
  positions against the exact product of the input set that last wrote it (SampledReference), so a
  launch that skipped is caught in the batch where it skipped;
- GEMM candidates may keep no module-scope device variables (hgemm.entry), so no memo survives a
  launch except in these buffers; and a timed median far below a fresh launch's time is flagged
  (hgemm.evaluate), as a last guard for any shortcut these miss.

Device-agnostic torch code: the CPU tests drive it with CPU tensors and recording launchers.
"""

from __future__ import annotations

from typing import Callable

import torch

from .verify import tolerance

# A timed median under FRESH_RATIO of (a fresh launch less FRESH_SLACK_US) is a kernel that skips work
# when its output is not fresh. The fresh launch is queued behind a spin like the timed batches, so
# its event pair holds the kernel and the events' own cost (about a microsecond), not the host's launch
# latency: an honest kernel's timed median is about its fresh time, small launch-bound ones included.
FRESH_RATIO = 0.5
FRESH_SLACK_US = 3.0
SAMPLES = 512  # positions per check: a skipped tile of 1/64 of C escapes one check with p < 1e-3


class SampledReference:
    """The float64 product of each input set at fixed random positions, and each position's tolerance.

    Positions are drawn by the harness after the inputs exist and never leave it, so a kernel cannot
    compute only those."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor, layout: str, gen: torch.Generator,
                 samples: int = SAMPLES, chunk_bytes: int = 1 << 28):
        """A, B: every input set stacked, (sets, batch, rows, cols)."""
        n, batch, M, K = A.shape
        N = B.shape[3] if layout == "NN" else B.shape[2]
        s = min(samples, batch * M * N)
        device = A.device
        self.b = torch.randint(0, batch, (s,), generator=gen, device=device)
        self.r = torch.randint(0, M, (s,), generator=gen, device=device)
        self.c = torch.randint(0, N, (s,), generator=gen, device=device)
        Bt = B.transpose(-1, -2) if layout == "NN" else B  # (sets, batch, N, K): a column of op(B) per row
        refs, tols = [], []
        step = max(1, chunk_bytes // (2 * 8 * s * K))  # float64 rows and columns of `step` sets at a time
        for lo in range(0, n, step):
            rows = A[lo:lo + step, self.b, self.r, :].double()
            cols = Bt[lo:lo + step, self.b, self.c, :].double()
            ref = (rows * cols).sum(-1)
            refs.append(ref)
            tols.append(tolerance(ref, (rows.abs() * cols.abs()).sum(-1), K))
        self.ref, self.tol = torch.cat(refs), torch.cat(tols)  # (input sets, samples)

    def bad(self, outputs: torch.Tensor, which: list[int], inputs: list[int]) -> torch.Tensor:
        """(len(which), samples) on the device: True where outputs[which[j]] (outputs: (sets, batch, M,
        N)) is not input set inputs[j]'s product. One gather for all: it runs after every timed batch."""
        o = torch.tensor(which, device=outputs.device, dtype=torch.long)[:, None]
        got = outputs[o, self.b[None], self.r[None], self.c[None]].double()
        i = torch.tensor(inputs, device=outputs.device, dtype=torch.long)
        return ~((got - self.ref[i]).abs() <= self.tol[i])  # NaN is bad

    def check(self, outputs: torch.Tensor, which: list[int], inputs: list[int]) -> str:
        """'' when every outputs[which[j]] holds input set inputs[j]'s product at the sampled
        positions, else what is wrong with the first that does not."""
        if not which:
            return ""
        bad = self.bad(outputs, which, inputs)
        if not bool(bad.any()):
            return ""
        j, k = (int(x) for x in bad.nonzero()[0])
        o = torch.tensor([which[j]], device=outputs.device)
        got = float(outputs[o, self.b[k:k + 1], self.r[k:k + 1], self.c[k:k + 1]].double()[0])
        pos = (int(self.b[k]), int(self.r[k]), int(self.c[k]))
        return (f"output {which[j]} (input set {inputs[j]}): {int(bad[j].sum())} of {bad.shape[1]} sampled "
                f"elements wrong; (batch, row, col) = {pos}: got {got}, want {float(self.ref[inputs[j], k])}")


Bind = Callable[[int, int], Callable[[], None]]


class OutputSlots:
    """Which input set's product each rotating output holds, and where the next launch writes.

    One instance may serve every contender of a problem (hgemm.evaluate times all the candidates of a
    shape over one pool of outputs, so its memory does not grow with their number): a launch, whoever
    makes it, writes into the least recently used output that holds another set's product, whoever
    wrote that. `content[i]` names input set i's data where several sets are copies of one draw (task
    inputs); by default every set is its own."""

    def __init__(self, n_inputs: int, content: list[int] | None = None):
        self.content = list(content) if content is not None else list(range(n_inputs))
        if len(set(self.content)) < 2:
            raise ValueError("output rotation needs input sets of at least two different contents")
        self.n = n_inputs
        self.m = n_inputs + 1
        self.last = [-1] * self.m  # the input set whose product output o holds (-1: still poisoned)
        self.writer: list[object | None] = [None] * self.m  # the contender that wrote it
        self._next = 0

    def pick(self, i: int) -> tuple[int, int]:
        """(input set, output) for a launch asked for on set i: the least recently used output that
        holds another set's product. If every output holds set i's (only when the Timer hands the
        contenders the same set many times running), use the next input set instead."""
        for step in range(self.m):
            o = (self._next + step) % self.m
            if self.last[o] < 0 or self.content[self.last[o]] != self.content[i]:
                self._next = (o + 1) % self.m
                return i, o
        o, self._next = self._next, (self._next + 1) % self.m
        other = next(j for j in range(i + 1, i + self.n) if self.content[j % self.n] != self.content[i])
        return other % self.n, o


class RotatingOutputs:
    """A timed contender f(i) for input set i that writes into a rotating output.

    `bind(i, o)` makes the launcher of input set i into output o (with output o's workspace); launchers
    are made once per pair actually used and cached. The outputs' state lives in `slots` (OutputSlots,
    its own unless one shared with other contenders is given); `written` and `inputs_used` are this
    contender's since its last check."""

    def __init__(self, n_inputs: int, bind: Bind, content: list[int] | None = None, slots: OutputSlots | None = None):
        self.slots = slots if slots is not None else OutputSlots(n_inputs, content)
        if self.slots.n != n_inputs:
            raise ValueError(f"{n_inputs} input sets, but the shared slots rotate over {self.slots.n}")
        self.n = n_inputs
        self.bind = bind
        self.written: set[int] = set()  # outputs written since the last check
        self.inputs_used: set[int] = set()  # input sets read since the last check
        self.failure = ""
        self._launchers: dict[tuple[int, int], Callable[[], None]] = {}

    @property
    def last(self) -> list[int]:
        return self.slots.last

    def pick(self, i: int) -> tuple[int, int]:
        return self.slots.pick(i)

    def __call__(self, i: int) -> None:
        i, o = self.pick(i)
        launch = self._launchers.get((i, o))
        if launch is None:
            launch = self._launchers[(i, o)] = self.bind(i, o)
        launch()
        self.slots.last[o] = i
        self.slots.writer[o] = self
        self.written.add(o)
        self.inputs_used.add(i)

    def own_written(self) -> dict[int, int]:
        """Output -> input set, for the outputs written since the last check that still hold this
        contender's writes: with shared slots, another contender may have overwritten one since (the
        Timer's untimed warm-up launches run every contender before the first check)."""
        return {o: self.slots.last[o] for o in sorted(self.written) if self.slots.writer[o] is self}

    def check_written(self, outputs: torch.Tensor, reference: SampledReference,
                      also: torch.Tensor | None = None) -> bool:
        """Check every output written since the last call that still holds this contender's write
        (outputs: (sets, batch, M, N)), keeping the first failure in `failure`. `also`, a boolean on the
        device, is read in the same synchronisation and returned (False without it): the evaluator's
        check of the inputs rides along."""
        which = sorted(self.own_written())
        self.written.clear()
        self.inputs_used.clear()
        flags = [reference.bad(outputs, which, [self.last[o] for o in which]).any()] if which else []
        flags += [also] if also is not None else []
        if not flags:
            return False
        values = torch.stack(flags).tolist()
        if which and values[0] and not self.failure:
            self.failure = reference.check(outputs, which, [self.last[o] for o in which])
        return bool(values[-1]) if also is not None else False

"""Evaluate candidates on one GEMM problem on this process's GPU: verify each, then time the verified
ones interleaved with the baselines.

Runs inside a pool worker (hgemm.pool) or directly in a GPU test. A kernel that faults the context
raises ContextLost after its result is emitted, so the worker can die and be replaced.
"""

from __future__ import annotations

import gc
import math
import os
import random
import time
from typing import Callable

import torch

from . import baselines as bl
from .candidate import SpecError, parse_candidate
from .clocks import ClockProbe
from .compile import compile_candidate
from .entry import Entry, EvalOptions
from .params import (gemm_param_buffer, gemm_params, output_params, pack_params, param_layout, patch_params,
                     workspace_to_zero)
from .problem import Problem, TaskProblem
from .evaluate_task import TaskEvaluator
from .runtime import (ContextLost, KernelLaunchError, LoadedKernel, Utilities, device_properties, synchronize,
                      utility_candidate)
from .rotation import FRESH_RATIO, FRESH_SLACK_US, OutputSlots, RotatingOutputs, SampledReference
from .timing import Timer, queued_launch_us, single_launch_us, tracked
from .verify import GuardedBuffer, check_output, random_tensor, redraw, reference, shared_inputs, shared_intact


ROW_ALIGN = 512  # fp16 elements (1 KiB): each rotated output or workspace starts as aligned as its own allocation would


class Phases:
    """Seconds one problem's evaluation spent in each phase (hgemm.entry.EVAL_PHASES), the GPU's work
    included (each lap synchronises): where a judge's time goes (`seconds` in run_problem's result)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        synchronize()
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now


def _rows(count: int, elems: int) -> torch.Tensor:
    """`count` fp16 buffers of `elems` elements in one allocation, each starting on a 1 KiB boundary
    (kernels may rely on vector- and TMA-aligned bases, and staged copies on STAGE_ALIGN)."""
    stride = -(-max(1, elems) // ROW_ALIGN) * ROW_ALIGN
    return torch.empty((count, stride), dtype=torch.float16, device="cuda")[:, :max(1, elems)]


class GemmEvaluator:
    def __init__(self, options: EvalOptions | None = None):
        self.options = options or EvalOptions()
        self.props = device_properties()
        util = compile_candidate(utility_candidate(), arch=None)
        if not util.ok:
            raise RuntimeError(f"harness utility kernels failed to compile: {util.error}")
        self.util = Utilities(util.cubin_path, self.props)
        self.clocks = ClockProbe(self.props.get("pci_bus_id"))
        self._kernels: dict[tuple[str, str], LoadedKernel] = {}
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference must be true fp32/fp64
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        self._tasks = TaskEvaluator(self)  # general tasks: the same device, utilities and kernel cache

    def ceilings(self) -> dict:
        """This GPU's measured ceilings, for roofline comparisons in the same run: device-to-device
        copy bandwidth (bytes read plus written), write-only bandwidth (a fill: the ceiling of a kernel
        bound by storing C, as a short K is) and cuBLAS fp16 throughput at 8192^3."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB: many times the L2
        y = torch.empty_like(x)
        y.copy_(x)
        start.record()
        for _ in range(10):
            y.copy_(x)
        end.record()
        end.synchronize()
        copy_gbps = 10 * 2 * x.numel() / (start.elapsed_time(end) * 1e-3) / 1e9
        start.record()
        for i in range(10):
            y.fill_(0x5A + i)  # not zeros: nothing a memory system could compress
        end.record()
        end.synchronize()
        write_gbps = 10 * y.numel() / (start.elapsed_time(end) * 1e-3) / 1e9
        del x, y
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = random_tensor((8192, 8192), "normal", gen, "cuda")  # random data: zeros run faster
        b = random_tensor((8192, 8192), "normal", gen, "cuda")
        torch.matmul(a, b)
        start.record()
        for _ in range(10):
            torch.matmul(a, b)
        end.record()
        end.synchronize()
        tflops = 10 * 2 * 8192**3 / (start.elapsed_time(end) * 1e-3) / 1e12
        return {"copy_gbps": copy_gbps, "write_gbps": write_gbps, "cublas_fp16_tflops_8192": tflops}

    # -- launching ------------------------------------------------------------------------------
    def _kernel(self, cubin: str, entry: str) -> LoadedKernel:
        key = (cubin, entry)
        if key not in self._kernels:
            self._kernels[key] = LoadedKernel(cubin, entry)
        return self._kernels[key]

    def launch_setup(self, kernel: LoadedKernel, spec, problem: Problem) -> tuple:
        """(grid, block, dynamic smem) from the spec, with the kernel's smem limit raised to match."""
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        grid, block, smem, _ = spec.launch_dims(env)
        if smem > self.props["max_smem_per_block_optin"]:
            raise SpecError("smem", f"{smem} bytes exceed the device's {self.props['max_smem_per_block_optin']}")
        kernel.prepare_smem(smem)
        return grid, block, smem

    @staticmethod
    def launcher(kernel: LoadedKernel, dims: tuple, buf: bytes, zeroed: torch.Tensor | None) -> Callable[[], None]:
        grid, block, smem = dims
        if zeroed is not None and zeroed.numel():
            def launch():
                zeroed.zero_()  # the contract: workspace is zero at every launch, staged copies aside (timed too)
                kernel.launch(grid, block, buf, smem)
        else:
            def launch():
                kernel.launch(grid, block, buf, smem)
        return launch

    def bind(self, kernel: LoadedKernel, spec, problem: Problem, A, B, C, W) -> Callable[[], None]:
        """A zero-argument launcher with the parameter buffer packed once."""
        dims = self.launch_setup(kernel, spec, problem)
        buf = gemm_param_buffer(spec, problem, A, B, C, W, kernel.param_layout)
        return self.launcher(kernel, dims, buf, workspace_to_zero(spec, problem, W) if spec.zero_each_launch else None)

    # -- verification ---------------------------------------------------------------------------
    def checked_launch(self, launch: Callable[[], None]) -> tuple[float, dict | None]:
        """One verification launch on NaN-scrubbed shared memory: its time in µs, or the classified
        failure (`crash` when the fault is sticky, else `launch_error`). Shared with the task evaluator."""
        self.util.scrub_shared_memory()
        try:
            us = single_launch_us(launch)
            synchronize()
        except KernelLaunchError as e:
            return 0.0, {"status": "crash" if e.sticky else "launch_error", "error": str(e), "sticky": e.sticky}
        return us, None

    def verification_inputs(self, problem: Problem, seed: int) -> list[dict]:
        """Per distribution, guarded inputs, copies to compare against and the float64 reference: drawn
        once per problem (fresh per evaluation) and shared by its candidates, since the reference is
        the costly part of a check. A candidate that touches them, or the copies and reference beside
        them (hgemm.verify.shared_intact, after every launch), is `wrong`, and they are put back."""
        return [shared_inputs(problem, dist, seed + 7919 * d_index, "cuda")
                for d_index, dist in enumerate(self.options.distributions)]

    def verify(self, entry: Entry, problem: Problem, seed: int, shared: list[dict] | None = None) -> dict:
        """Status and per-distribution checks of one candidate on one problem (inputs from
        verification_inputs, drawn here when not given)."""
        cand = parse_candidate(entry.text, entry.variables)
        if not cand.supports(problem.layout):
            return {"status": "unsupported", "error": f"layout {problem.layout} not in spec layouts {cand.spec.layouts}"}
        kernel = self._kernel(entry.cubins[problem.layout], cand.spec.entry)
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        shared = shared if shared is not None else self.verification_inputs(problem, seed)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        checks, launch_us = [], 0.0
        for inputs in shared:
            A, B, dist = inputs["A"], inputs["B"], inputs["distribution"]
            C = GuardedBuffer(problem.c_shape, torch.float16, "cuda", gen)
            C.poison()
            ws_bytes = cand.spec.workspace(env)
            W = GuardedBuffer((max(1, -(-ws_bytes // 2)),), torch.float16, "cuda", gen) if ws_bytes else None
            try:
                launch = self.bind(kernel, cand.spec, problem, A.tensor, B.tensor, C.tensor,
                                   W.tensor if W is not None else None)
            except (SpecError, ValueError) as e:
                status = "launch_error" if isinstance(e, SpecError) else "unsupported"
                return {"status": status, "error": str(e), "checks": checks}
            kept = workspace_to_zero(cand.spec, problem, W.tensor) if W is not None and not cand.spec.zero_each_launch else None
            if kept is not None:
                kept.zero_()  # once, as the timing and hgemm.matmul fill it: the kernel keeps it so
            us, failure = self.checked_launch(launch)
            if failure:
                return failure | {"checks": checks}
            launch_us = max(launch_us, us)
            problems = []
            if kept is not None and bool((kept.view(torch.int16) != 0).any()):
                problems.append("left its workspace non-zero (workspace_zero: kept promises to leave it zero)")
            for name, buf in (("A", A), ("B", B), ("C", C)) + ((("workspace", W),) if W is not None else ()):
                if not buf.guards_intact():
                    problems.append(f"wrote outside {name} (guard band changed)")
            for name, buf, saved in (("A", A, inputs["a0"]), ("B", B, inputs["b0"])):
                if not torch.equal(buf.tensor.view(torch.int16), saved.view(torch.int16)):
                    problems.append(f"modified input {name}")
            # Every distribution's shared data, not only this launch's: a write past every guard band
            # lands anywhere. What changed is drawn again from its seed, so that the candidates after this
            # one are judged against the true product; this one is `wrong`.
            dirty = [data for data in shared if not shared_intact(data)]
            for data in dirty:
                redraw(data, problem, "cuda")
            if dirty:
                if not problems:
                    problems.append("wrote into the data the harness shares between candidates (the reference, "
                                    "|A| @ |B| or an input copy), outside every buffer it was given")
                return {"status": "wrong", "error": "; ".join(problems), "checks": checks, "launch_us": launch_us}
            report = check_output(C.tensor, inputs["ref"], inputs["absprod"], problem.K, exact=dist == "small_int")
            checks.append({"distribution": dist, **report.to_dict()})
            if problems or not report.ok:  # problems here are C's or the workspace's guards: nothing shared
                return {"status": "wrong", "error": "; ".join(problems + ([report.detail] if report.detail else [])),
                        "checks": checks, "launch_us": launch_us}
            del C, W
        return {"status": "ok", "checks": checks, "launch_us": launch_us}

    # -- one problem, many candidates -----------------------------------------------------------
    def run_problem(self, problem: Problem | TaskProblem, entries: list[Entry], emit: Callable[[str, dict], None],
                    task=None) -> dict:
        """Verify every entry, then time the verified ones with the baselines. Calls emit('begin', ...)
        before touching a candidate so a supervisor can attribute a hang or crash to it. A TaskProblem
        needs its task (kernels_corpus.tasks.base.KernelTask), which the caller resolves."""
        if isinstance(problem, TaskProblem):
            return self._tasks.run_problem(problem, task, entries, emit)
        opts = self.options
        seed = opts.seed if opts.seed is not None else int.from_bytes(os.urandom(4), "little")
        results: dict[str, dict] = {}
        phases = Phases()
        shared = self.verification_inputs(problem, seed)
        phases.lap("reference")  # inputs and their float64 products, one per distribution
        emit("alive", {})  # the references are done: the first candidate's deadline starts here, not before them
        for idx, entry in enumerate(entries):
            emit("begin", {"index": idx, "phase": "verify"})
            res = self.verify(entry, problem, seed + 104729 * idx, shared)
            res["resources"] = entry.resources.get(problem.layout, {})
            results[entry.name] = res
            emit("verified", {"index": idx, "result": res})
            if res.get("sticky"):
                raise ContextLost(res["error"])
        del shared
        phases.lap("verify")
        out = {"problem": problem.to_dict(), "candidates": results, "seed": seed, "seconds": phases.seconds}
        if not opts.timing:
            return out
        emit("begin", {"index": -1, "phase": "timing"})
        out.update(self.time_problem(problem, entries, results, seed, alive=lambda: emit("alive", {}), phases=phases))
        # the timing's buffers (input sets, the outputs, the references: several C-sized tensors) go before
        # the next problem allocates its own, not whenever Python's collector next finds what refers to them
        gc.collect()
        return out

    def _make_sets(self, problem: Problem, seed: int) -> tuple[bl.Sets, int, torch.Tensor, torch.Tensor]:
        """The timing's input sets, as views of two stacked tensors (n, batch, rows, cols) whose rows
        start as aligned as separate allocations would: the guards check all sets in one operation."""
        set_bytes = problem.min_bytes
        want = math.ceil(self.options.l2_factor * self.props["l2_bytes"] / set_bytes)
        cap = max(1, min(self.options.max_sets, self.options.max_timing_bytes // (2 * set_bytes)))
        n = max(2, min(want, cap))  # two at least: output rotation needs another set's product to hand
        gen = torch.Generator(device="cuda").manual_seed(seed ^ 0x5EED)
        stacked = []
        for shape in (problem.a_shape, problem.b_shape):
            x = _rows(n, math.prod(shape)).view((n,) + tuple(shape))
            for i in range(n):
                x[i].copy_(random_tensor(shape, "normal", gen, "cuda"))
            stacked.append(x)
        A, B = stacked
        return bl.Sets(list(A), list(B)), set_bytes, A, B

    def _fresh_launch_us(self, launch: Callable[[], None], out: torch.Tensor, launches: int) -> float:
        """The fastest of a few launches, each into an output poisoned just before it (outside the
        event pair, queued behind a spin): what the kernel costs when it must do the work."""
        best = math.inf
        for _ in range(launches):
            synchronize()
            out.view(torch.int16).fill_(0x7E00)
            best = min(best, queued_launch_us(self.util, launch))
        return best

    def _output_pool(self, problem: Problem, n: int) -> dict:
        """The outputs every candidate of a problem writes into, poisoned, and the rotation's state over
        them: one more output than input sets (hgemm.rotation), or one per set when the integrity guards
        are off, and one for the fresh launches. Shared, since a candidate's outputs are checked before
        the next contender runs: a 56-batch 3392 x 2103 shape's C is 800 MB, and the outputs of forty
        candidates each of its own would not fit in an H100's memory."""
        m = n + 1 if self.options.fresh_outputs else n
        outs = _rows(m, math.prod(problem.c_shape)).view((m,) + tuple(problem.c_shape))
        outs.view(torch.int16).fill_(0x7E00)  # poisoned: an output no timed run wrote shows as NaN
        return {"outs": outs, "slots": OutputSlots(n) if self.options.fresh_outputs else None,
                "fresh_out": torch.empty(tuple(problem.c_shape), dtype=torch.float16, device="cuda")}

    def _candidate_contender(self, entry: Entry, problem: Problem, sets: bl.Sets, env: dict, pool: dict) -> dict:
        """The rotating-output contender of one verified candidate over the problem's shared outputs
        (hgemm.rotation), or a plain one writing input set i's product into output i when the integrity
        guards are off. Workspaces stay the candidate's own, one per output and one for the fresh
        launch: staged operand copies in them are what another candidate's layout would not overwrite."""
        cand = parse_candidate(entry.text, entry.variables)
        kernel = self._kernel(entry.cubins[problem.layout], cand.spec.entry)
        n, outs = len(sets), pool["outs"]
        m = outs.shape[0]
        ws_bytes = cand.spec.workspace(env)
        ws = _rows(m + 1, -(-ws_bytes // 2)) if ws_bytes else None
        if ws is not None and not cand.spec.zero_each_launch:
            ws.zero_()  # once: the kernel keeps it zero (workspace_zero: kept), checked after every batch
        dims = self.launch_setup(kernel, cand.spec, problem)
        spec, layout = cand.spec, None
        by_input: dict[int, bytes] = {}
        by_output: dict[int, list] = {}
        which = output_params(spec)

        def bind(i: int, o: int) -> Callable[[], None]:
            # one packing per input set and one per output, patched together: pairs change every launch
            nonlocal layout
            W = ws[o] if ws is not None else None
            if o not in by_output:
                by_output[o] = gemm_params(spec, problem, sets.A[0], sets.B[0], outs[o], W)
                layout = layout or param_layout(by_output[o], kernel.param_layout)
            if i not in by_input:
                by_input[i] = pack_params(gemm_params(spec, problem, sets.A[i], sets.B[i], outs[0],
                                                      ws[0] if ws is not None else None), layout)
            buf = patch_params(by_input[i], by_output[o], layout, which)
            return self.launcher(kernel, dims, buf, workspace_to_zero(spec, problem, W) if spec.zero_each_launch else None)

        fresh = self.bind(kernel, cand.spec, problem, sets.A[0], sets.B[0], pool["fresh_out"],
                          ws[m] if ws is not None else None)
        # the zero-filled part of each output's workspace, for a kernel that keeps it zero
        kept = [workspace_to_zero(spec, problem, w) for w in ws] if ws is not None and not spec.zero_each_launch else None
        common = {"fresh": fresh, "recheck": [], "kept": kept, "dirty": ""}
        if self.options.fresh_outputs:
            rot = RotatingOutputs(n, bind, slots=pool["slots"])
            return {"run": rot, "rotation": rot} | common
        run, touched = tracked([bind(i, i) for i in range(n)])
        return {"run": run, "rotation": None, "touched": touched} | common

    def time_problem(self, problem: Problem, entries: list[Entry], results: dict[str, dict], seed: int,
                     alive: Callable[[], None] = lambda: None, phases: Phases | None = None) -> dict:
        """Time the verified entries beside the baselines; `alive()` after every batch tells a
        supervisor that the timing goes on (hgemm.pool). `phases` gets the timing's phases."""
        opts = self.options
        phases = phases or Phases()
        sets, set_bytes, A_all, B_all = self._make_sets(problem, seed)
        n = len(sets)
        names = tuple(opts.baselines) + (("torch_compile",) if opts.torch_compile and "torch_compile" not in opts.baselines else ())
        bases, skipped = bl.make_baselines(problem, sets, names)
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        timed = [e for e in entries if results[e.name]["status"] == "ok"]
        pool = self._output_pool(problem, n) if timed else None
        cands = {e.name: self._candidate_contender(e, problem, sets, env, pool) for e in timed}
        contenders: dict[str, Callable[[int], None]] = {f"cand:{name}": c["run"] for name, c in cands.items()}
        gen = torch.Generator(device="cuda").manual_seed(seed ^ 0xC0FFEE)
        guarded = bool(cands) and opts.fresh_outputs
        sampled = SampledReference(A_all, B_all, problem.layout, gen) if guarded else None
        inputs_before = (A_all.clone(), B_all.clone()) if guarded else None
        rng = random.Random(seed)
        probe = rng.randrange(n)
        refs: dict[int, tuple] = {}  # input set -> its full reference, made when a check first needs it

        def after_batch(name: str, last: bool) -> None:
            # the outputs this batch wrote are checked before another contender's launches overwrite them
            alive()
            c = cands.get(name[5:]) if name.startswith("cand:") else None
            if c is None:
                return
            if c["rotation"] is not None:
                written = c["rotation"].own_written()
                changed = ((A_all.view(torch.int16) != inputs_before[0].view(torch.int16)).any()
                           | (B_all.view(torch.int16) != inputs_before[1].view(torch.int16)).any())
                if c["rotation"].check_written(pool["outs"], sampled, also=changed):
                    # an input changed by this candidate's batch: blamed on it, then put back for the others
                    c["modified_inputs"] = True
                    A_all.copy_(inputs_before[0])
                    B_all.copy_(inputs_before[1])
            else:
                written = {i: i for i in c["touched"]}
                c["touched"].clear()
            if c["kept"] is not None and written and not c["dirty"]:
                outs = sorted(written)
                flags = torch.stack([(c["kept"][o].view(torch.int16) != 0).any() for o in outs]).tolist()
                left = [o for o, f in zip(outs, flags) if f]
                if left:
                    c["dirty"] = (f"a timed launch left output {left[0]}'s workspace non-zero "
                                  "(workspace_zero: kept promises to leave it zero)")
            if last:
                c["recheck"] = self._recheck(pool["outs"], written, sets, problem, refs, rng)

        slowest_ms = max([results[e.name].get("launch_us", 0.0) / 1e3 for e in entries if e.name in cands] + [0.0])
        reps = opts.reps if slowest_ms < opts.slow_kernel_ms else 3
        timer = Timer(self.util, n, reps=reps, target_batch_ms=opts.target_batch_ms, method=opts.timing_method,
                      clocks=self.clocks, sustained_ms=opts.sustained_ms)

        phases.lap("timing_setup")  # input sets, outputs, baselines' plans, sampled references
        lt_choice = None
        for b in bases:
            if b.variants and len(b.variants) > 1:
                # best-of-N: time each heuristic algorithm briefly, keep the fastest for the main run
                quick = Timer(self.util, n, reps=3, target_batch_ms=1.0)
                stats = quick.time_interleaved({str(k): fn for k, fn in b.variants.items()})
                lt_choice = min(stats, key=lambda k: stats[k].median_us)
                b.run = b.variants[int(lt_choice)]
                b.note += f"; best algorithm index {lt_choice}"
        for b in bases:
            contenders[b.name] = b.run
        phases.lap("baseline_algorithms")  # cuBLASLt's heuristic algorithms, each timed briefly
        stats = timer.time_interleaved(contenders, after_batch=after_batch)
        phases.lap("timed")  # the interleaved batches, and the checks after each

        base_out = {}
        if probe not in refs:
            refs[probe] = reference(sets.A[probe], sets.B[probe], problem.layout)
        for b in bases:
            b.run(probe)  # a baseline's time counts only if its output is right too
            synchronize()
            report = check_output(b.out[probe], *refs[probe], problem.K)
            s = stats[b.name]
            base_out[b.name] = {"timing": s.to_dict(), "tflops": problem.flops / s.median_us / 1e6,
                                "verified": report.ok, "note": b.note}
        verified = {k: v for k, v in base_out.items() if v["verified"]}
        best = min(verified, key=lambda k: verified[k]["timing"]["median_us"]) if verified else None
        best_us = verified[best]["timing"]["median_us"] if best else None
        cublas_us = verified.get("cublas", {}).get("timing", {}).get("median_us")
        for name, c in cands.items():
            res = results[name]
            s = stats[f"cand:{name}"]
            bad = list(c["recheck"]) + ([c["dirty"]] if c["dirty"] else [])
            if c["rotation"] is not None and c["rotation"].failure:
                bad.insert(0, "a timed launch left a wrong result: " + c["rotation"].failure)
            if c.get("modified_inputs"):
                bad.insert(0, "its timed runs modified an input set")
            slow = results[name].get("launch_us", 0.0) > 50e3
            fresh_us = self._fresh_launch_us(c["fresh"], pool["fresh_out"], 1 if slow else 2)
            res["fresh_launch_us"] = fresh_us
            if opts.fresh_outputs and s.median_us < FRESH_RATIO * (fresh_us - FRESH_SLACK_US):
                bad.append(f"timed median {s.median_us:.2f} us is under {FRESH_RATIO} of a fresh launch's "
                           f"{fresh_us:.2f} us (less {FRESH_SLACK_US:.0f} us): the timed launches "
                           "skipped work that a launch into a fresh output does")
            res["timing"] = s.to_dict()
            res["time_us"] = s.median_us
            res["tflops"] = problem.flops / s.median_us / 1e6
            res["gbps"] = problem.min_bytes / s.median_us / 1e3
            if bad:
                # the timed runs did not do what the verified run did: cached, skipped or racy work
                res["status"] = "wrong"
                res["error"] = "re-check after timing failed: " + "; ".join(bad[:3])
            if best_us:
                res["speedup_vs_best"] = best_us / s.median_us
            if cublas_us:
                res["speedup_vs_cublas"] = cublas_us / s.median_us
        phases.lap("after_timing")  # the baselines' check, fresh launches
        return {"baselines": base_out, "baselines_skipped": skipped, "best_baseline": best,
                "best_baseline_us": best_us, "n_sets": n, "set_bytes": set_bytes,
                "l2_cold": n * set_bytes >= opts.l2_factor * self.props["l2_bytes"],
                "timing_method": opts.timing_method, "timer_overhead_us": timer.overhead_us, "reps": reps,
                "fresh_outputs": opts.fresh_outputs}

    def _recheck(self, outs: torch.Tensor, written: dict[int, int], sets: bl.Sets, problem: Problem, refs: dict,
                 rng: random.Random) -> list[str]:
        """The full check of a sample of the outputs a candidate's last timed batch wrote (output ->
        the input set whose product it must hold)."""
        bad = []
        for o in rng.sample(sorted(written), min(len(written), self.options.recheck_sets)):
            i = written[o]
            if i not in refs:
                refs[i] = reference(sets.A[i], sets.B[i], problem.layout)
            report = check_output(outs[o], *refs[i], problem.K)
            if not report.ok:
                bad.append(f"output {o} (input set {i}): {report.detail}")
        return bad

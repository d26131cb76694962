"""Evaluate candidates on one GEMM problem on this process's GPU: verify each, then time the verified
ones interleaved with the baselines.

Runs inside a pool worker (hgemm.pool) or directly in a GPU test. A kernel that faults the context
raises ContextLost after its result is emitted, so the worker can die and be replaced.
"""

from __future__ import annotations

import math
import os
import random
from typing import Callable

import torch

from . import baselines as bl
from .candidate import SpecError, parse_candidate
from .compile import compile_candidate
from .entry import Entry, EvalOptions
from .params import gemm_param_buffer, workspace_to_zero
from .problem import Problem, TaskProblem
from .runtime import KernelLaunchError, LoadedKernel, Utilities, device_properties, synchronize, utility_candidate
from .timing import Timer, single_launch_us, tracked
from .verify import GuardedBuffer, check_output, problem_inputs, random_tensor, reference


class ContextLost(RuntimeError):
    """The CUDA context is unusable (sticky fault); the process must be replaced."""


class GemmEvaluator:
    def __init__(self, options: EvalOptions | None = None):
        self.options = options or EvalOptions()
        self.props = device_properties()
        util = compile_candidate(utility_candidate(), arch=None)
        if not util.ok:
            raise RuntimeError(f"harness utility kernels failed to compile: {util.error}")
        self.util = Utilities(util.cubin_path, self.props)
        self._kernels: dict[tuple[str, str], LoadedKernel] = {}
        self._tasks = None  # the general-task evaluator, made on first use
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference must be true fp32/fp64
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

    def ceilings(self) -> dict:
        """This GPU's measured ceilings, for roofline comparisons in the same run: device-to-device
        copy bandwidth (bytes read plus written) and cuBLAS fp16 throughput at 8192^3."""
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
        return {"copy_gbps": copy_gbps, "cublas_fp16_tflops_8192": tflops}

    # -- launching ------------------------------------------------------------------------------
    def _kernel(self, cubin: str, entry: str) -> LoadedKernel:
        key = (cubin, entry)
        if key not in self._kernels:
            self._kernels[key] = LoadedKernel(cubin, entry)
        return self._kernels[key]

    def bind(self, kernel: LoadedKernel, spec, problem: Problem, A, B, C, W) -> Callable[[], None]:
        """A zero-argument launcher with the parameter buffer packed once."""
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        grid, block, smem, _ = spec.launch_dims(env)
        if smem > self.props["max_smem_per_block_optin"]:
            raise SpecError("smem", f"{smem} bytes exceed the device's {self.props['max_smem_per_block_optin']}")
        kernel.prepare_smem(smem)
        buf = gemm_param_buffer(spec, problem, A, B, C, W, kernel.param_layout)
        zeroed = workspace_to_zero(spec, problem, W)

        if zeroed is not None and zeroed.numel():
            def launch():
                zeroed.zero_()  # the contract: workspace is zero at every launch, staged copies aside (timed too)
                kernel.launch(grid, block, buf, smem)
        else:
            def launch():
                kernel.launch(grid, block, buf, smem)
        return launch

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

    def verify(self, entry: Entry, problem: Problem, seed: int) -> dict:
        """Status and per-distribution checks of one candidate on one problem."""
        cand = parse_candidate(entry.text, entry.variables)
        if not cand.supports(problem.layout):
            return {"status": "unsupported", "error": f"layout {problem.layout} not in spec layouts {cand.spec.layouts}"}
        kernel = self._kernel(entry.cubins[problem.layout], cand.spec.entry)
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        checks, launch_us = [], 0.0
        for d_index, dist in enumerate(self.options.distributions):
            gen = torch.Generator(device="cuda").manual_seed(seed + 7919 * d_index)
            A, B = problem_inputs(problem, dist, gen, "cuda")
            C = GuardedBuffer(problem.c_shape, torch.float16, "cuda", gen)
            C.poison()
            ws_bytes = cand.spec.workspace(env)
            W = GuardedBuffer((max(1, -(-ws_bytes // 2)),), torch.float16, "cuda", gen) if ws_bytes else None
            a0, b0 = A.tensor.clone(), B.tensor.clone()
            ref, absprod = reference(A.tensor, B.tensor, problem.layout)
            try:
                launch = self.bind(kernel, cand.spec, problem, A.tensor, B.tensor, C.tensor,
                                   W.tensor if W is not None else None)
            except (SpecError, ValueError) as e:
                status = "launch_error" if isinstance(e, SpecError) else "unsupported"
                return {"status": status, "error": str(e), "checks": checks}
            us, failure = self.checked_launch(launch)
            if failure:
                return failure | {"checks": checks}
            launch_us = max(launch_us, us)
            problems = []
            for name, buf in (("A", A), ("B", B), ("C", C)) + ((("workspace", W),) if W is not None else ()):
                if not buf.guards_intact():
                    problems.append(f"wrote outside {name} (guard band changed)")
            if not torch.equal(A.tensor.view(torch.int16), a0.view(torch.int16)):
                problems.append("modified input A")
            if not torch.equal(B.tensor.view(torch.int16), b0.view(torch.int16)):
                problems.append("modified input B")
            report = check_output(C.tensor, ref, absprod, problem.K, exact=dist == "small_int")
            checks.append({"distribution": dist, **report.to_dict()})
            if problems or not report.ok:
                return {"status": "wrong", "error": "; ".join(problems + ([report.detail] if report.detail else [])),
                        "checks": checks, "launch_us": launch_us}
            del A, B, C, W, ref, absprod, a0, b0
        return {"status": "ok", "checks": checks, "launch_us": launch_us}

    # -- one problem, many candidates -----------------------------------------------------------
    def run_problem(self, problem: Problem | TaskProblem, entries: list[Entry], emit: Callable[[str, dict], None]) -> dict:
        """Verify every entry, then time the verified ones with the baselines. Calls emit('begin', ...)
        before touching a candidate so a supervisor can attribute a hang or crash to it."""
        if isinstance(problem, TaskProblem):
            if self._tasks is None:
                from .evaluate_task import TaskEvaluator

                self._tasks = TaskEvaluator(self)
            return self._tasks.run_problem(problem, entries, emit)
        opts = self.options
        seed = opts.seed if opts.seed is not None else int.from_bytes(os.urandom(4), "little")
        results: dict[str, dict] = {}
        for idx, entry in enumerate(entries):
            emit("begin", {"index": idx, "phase": "verify"})
            res = self.verify(entry, problem, seed + 104729 * idx)
            res["resources"] = entry.resources.get(problem.layout, {})
            results[entry.name] = res
            emit("verified", {"index": idx, "result": res})
            if res.get("sticky"):
                raise ContextLost(res["error"])
        out = {"problem": problem.to_dict(), "candidates": results, "seed": seed}
        if not opts.timing:
            return out
        emit("begin", {"index": -1, "phase": "timing"})
        out.update(self.time_problem(problem, entries, results, seed))
        return out

    def _make_sets(self, problem: Problem, seed: int) -> tuple[bl.Sets, int]:
        set_bytes = problem.min_bytes
        want = math.ceil(self.options.l2_factor * self.props["l2_bytes"] / set_bytes)
        cap = max(1, min(self.options.max_sets, self.options.max_timing_bytes // (2 * set_bytes)))
        n = max(1, min(want, cap))
        gen = torch.Generator(device="cuda").manual_seed(seed ^ 0x5EED)
        A = [random_tensor(problem.a_shape, "normal", gen, "cuda") for _ in range(n)]
        B = [random_tensor(problem.b_shape, "normal", gen, "cuda") for _ in range(n)]
        return bl.Sets(A, B), set_bytes

    def time_problem(self, problem: Problem, entries: list[Entry], results: dict[str, dict], seed: int) -> dict:
        opts = self.options
        sets, set_bytes = self._make_sets(problem, seed)
        n = len(sets)
        names = tuple(opts.baselines) + (("torch_compile",) if opts.torch_compile and "torch_compile" not in opts.baselines else ())
        bases, skipped = bl.make_baselines(problem, sets, names)
        contenders: dict[str, Callable[[int], None]] = {}
        cand_out: dict[str, tuple[list[torch.Tensor], set[int]]] = {}
        env = problem.variables() | {"num_sms": self.props["num_sms"]}
        for entry in entries:
            if results[entry.name]["status"] != "ok":
                continue
            cand = parse_candidate(entry.text, entry.variables)
            kernel = self._kernel(entry.cubins[problem.layout], cand.spec.entry)
            outs = [torch.empty(problem.c_shape, dtype=torch.float16, device="cuda") for _ in range(n)]
            ws_bytes = cand.spec.workspace(env)
            ws = [torch.empty(max(1, -(-ws_bytes // 2)), dtype=torch.float16, device="cuda") if ws_bytes else None
                  for _ in range(n)]
            launches = [self.bind(kernel, cand.spec, problem, sets.A[i], sets.B[i], outs[i], ws[i]) for i in range(n)]
            for o in outs:
                o.view(torch.int16).fill_(0x7E00)  # poisoned: the re-check sees what the timed runs wrote
            contenders[f"cand:{entry.name}"], touched = tracked(launches)
            cand_out[entry.name] = (outs, touched)
        slowest_ms = max([results[e.name].get("launch_us", 0.0) / 1e3 for e in entries if e.name in cand_out] + [0.0])
        reps = opts.reps if slowest_ms < opts.slow_kernel_ms else 3
        timer = Timer(self.util, n, reps=reps, target_batch_ms=opts.target_batch_ms, method=opts.timing_method)

        lt_choice = None
        for b in bases:
            if b.variants and len(b.variants) > 1:
                # best-of-N: time each heuristic algorithm briefly, keep the fastest for the main run
                quick = Timer(self.util, n, reps=3, target_batch_ms=1.0, method=opts.timing_method)
                stats = quick.time_interleaved({str(k): fn for k, fn in b.variants.items()})
                lt_choice = min(stats, key=lambda k: stats[k].median_us)
                b.run = b.variants[int(lt_choice)]
                b.note += f"; best algorithm index {lt_choice}"
        for b in bases:
            contenders[b.name] = b.run
        stats = timer.time_interleaved(contenders)
        synchronize()

        base_out = {}
        rng = random.Random(seed)
        probe = rng.randrange(n)
        refs = {probe: reference(sets.A[probe], sets.B[probe], problem.layout)}
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

        for name, (outs, touched) in cand_out.items():
            res = results[name]
            bad = []
            # only sets the timed runs wrote: each was poisoned before timing, so a stale or skipped
            # write shows as NaN here
            for i in rng.sample(sorted(touched), min(len(touched), opts.recheck_sets)):
                if i not in refs:
                    refs[i] = reference(sets.A[i], sets.B[i], problem.layout)
                report = check_output(outs[i], *refs[i], problem.K)
                if not report.ok:
                    bad.append(f"set {i}: {report.detail}")
            s = stats[f"cand:{name}"]
            res["timing"] = s.to_dict()
            res["time_us"] = s.median_us
            res["tflops"] = problem.flops / s.median_us / 1e6
            res["gbps"] = problem.min_bytes / s.median_us / 1e3
            if bad:
                # the timed runs wrote something else than the verified run: cached or racy results
                res["status"] = "wrong"
                res["error"] = "re-check after timing failed: " + "; ".join(bad[:3])
            if best_us:
                res["speedup_vs_best"] = best_us / s.median_us
            if cublas_us:
                res["speedup_vs_cublas"] = cublas_us / s.median_us
        return {"baselines": base_out, "baselines_skipped": skipped, "best_baseline": best,
                "best_baseline_us": best_us, "n_sets": n, "set_bytes": set_bytes,
                "l2_cold": n * set_bytes >= opts.l2_factor * self.props["l2_bytes"],
                "timing_method": opts.timing_method, "timer_overhead_us": timer.overhead_us, "reps": reps}

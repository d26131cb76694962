"""Evaluate candidates for a general kernel task (kernels_corpus.tasks) on this process's GPU.

The same guards as for GEMMs, with the task's own ABI: fresh random inputs (several seeds), poisoned
outputs, guard bands around every buffer, inputs checked unchanged, a float64 reference from the
task's torch implementation, shared memory scrubbed before each checked launch, and a re-check of
the timed runs' outputs. The timed baseline is the same torch implementation on the native dtypes.
"""

from __future__ import annotations

import math
import os
import random
from typing import Callable

import torch

from .candidate import SpecError, parse_candidate
from .entry import Entry
from .params import Param, pack_params
from .problem import TaskProblem
from .runtime import LoadedKernel, synchronize
from .timing import Timer, tracked
from .verify import GuardedBuffer

CHECK_SEEDS = 3  # independent input draws per verification
MAX_TASK_SETS = 64  # buffer sets for timing; tasks' inputs are cloned, not redrawn, so keep it modest
SCALAR_CODES = {"int32": "i", "int64": "q", "float32": "f"}


def _compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[bool, str]:
    if out.shape != ref.shape:
        return False, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if not out.is_floating_point():
        bad = out.to(torch.int64) != ref.to(torch.int64)
    else:
        o, r = out.double(), ref.double()
        bad = ~((o - r).abs() <= atol + rtol * r.abs())  # NaN is bad
    n_bad = int(bad.sum())
    if not n_bad:
        return True, ""
    idx = int(bad.flatten().nonzero()[0])
    return False, (f"{n_bad} of {out.numel()} elements wrong; first at flat index {idx}: "
                   f"got {out.flatten()[idx].item()}, want {ref.flatten()[idx].item()}")


class TaskEvaluator:
    """Shares the GEMM evaluator's device, utilities and loaded kernels."""

    def __init__(self, gemm):
        self.gemm = gemm
        self.options = gemm.options
        self.util = gemm.util

    def _bind(self, kernel: LoadedKernel, spec, task, sizes: dict, tensors: dict) -> Callable[[], None]:
        env = dict(sizes) | {"num_sms": self.gemm.props["num_sms"]}
        grid, block, smem, _ = spec.launch_dims(env)
        if smem > self.gemm.props["max_smem_per_block_optin"]:
            raise SpecError("smem", f"{smem} bytes exceed the device's {self.gemm.props['max_smem_per_block_optin']}")
        kernel.prepare_smem(smem)
        params = []
        for p in task.params:
            if p.kind == "scalar":
                params.append(Param(SCALAR_CODES[p.dtype], p.value_for(sizes)))
            else:
                params.append(Param("P", tensors[p.name].data_ptr()))
        buf = pack_params(params, kernel.param_layout)
        return lambda: kernel.launch(grid, block, buf, smem)

    def verify(self, entry: Entry, task, sizes: dict, seed: int) -> dict:
        from kernels_corpus.tasks.base import torch_dtype, upcast_float64

        cand = parse_candidate(entry.text, entry.variables)
        kernel = self.gemm._kernel(entry.cubins["NN"], cand.spec.entry)
        launch_us, checks = 0.0, []
        for draw in range(CHECK_SEEDS):
            gen = torch.Generator().manual_seed(seed + 7919 * draw)
            ggen = torch.Generator(device="cuda").manual_seed(seed + 7919 * draw)
            host_inputs = task.make_inputs(sizes, gen)
            bufs: dict[str, GuardedBuffer] = {}
            for p in task.params:
                if p.kind == "in":
                    bufs[p.name] = GuardedBuffer(p.shape_for(sizes), torch_dtype(p.dtype), "cuda", ggen)
                    bufs[p.name].tensor.copy_(host_inputs[p.name])
                elif p.kind == "out":
                    bufs[p.name] = GuardedBuffer(p.shape_for(sizes), torch_dtype(p.dtype), "cuda", ggen)
                    bufs[p.name].poison()
            inputs = {p.name: bufs[p.name].tensor for p in task.inputs}
            saved = {n: t.clone() for n, t in inputs.items()}
            ref = task.compute(upcast_float64(inputs), sizes)
            try:
                launch = self._bind(kernel, cand.spec, task, sizes, {n: b.tensor for n, b in bufs.items()})
            except SpecError as e:
                return {"status": "launch_error", "error": str(e), "checks": checks}
            us, failure = self.gemm.checked_launch(launch)
            if failure:
                return failure | {"checks": checks}
            launch_us = max(launch_us, us)
            problems = [f"wrote outside {n} (guard band changed)" for n, b in bufs.items() if not b.guards_intact()]
            problems += [f"modified input {n}" for n, t in inputs.items() if not torch.equal(t, saved[n])]
            for p in task.outputs:
                ok, why = _compare(bufs[p.name].tensor, ref[p.name], task.atol, task.rtol)
                checks.append({"draw": draw, "output": p.name, "ok": ok})
                if not ok:
                    problems.append(f"output {p.name}: {why}")
            if problems:
                return {"status": "wrong", "error": "; ".join(problems), "checks": checks, "launch_us": launch_us}
        return {"status": "ok", "checks": checks, "launch_us": launch_us}

    def run_problem(self, problem: TaskProblem, entries: list[Entry], emit) -> dict:
        from kernels_corpus.tasks import get_task

        task = get_task(problem.task)
        sizes = problem.variables()
        seed = self.options.seed if self.options.seed is not None else int.from_bytes(os.urandom(4), "little")
        results = {}
        for idx, entry in enumerate(entries):
            emit("begin", {"index": idx, "phase": "verify"})
            try:
                res = self.verify(entry, task, sizes, seed + 104729 * idx)
            except (SpecError, ValueError) as e:
                res = {"status": "launch_error", "error": str(e)}
            res["resources"] = entry.resources.get("NN", {})
            results[entry.name] = res
            emit("verified", {"index": idx, "result": res})
            if res.get("sticky"):
                from .evaluate import ContextLost

                raise ContextLost(res["error"])
        out = {"problem": problem.to_dict(), "candidates": results, "seed": seed}
        if self.options.timing and any(r["status"] == "ok" for r in results.values()):
            emit("begin", {"index": -1, "phase": "timing"})
            out.update(self._time(task, sizes, entries, results, seed))
        return out

    def _time(self, task, sizes: dict, entries: list[Entry], results: dict, seed: int) -> dict:
        from kernels_corpus.tasks.base import torch_dtype, upcast_float64

        host = task.make_inputs(sizes, torch.Generator().manual_seed(seed ^ 0x5EED))
        first = {n: t.to("cuda") for n, t in host.items()}
        set_bytes = sum(t.numel() * t.element_size() for t in first.values())
        set_bytes += sum(math.prod(p.shape_for(sizes)) * torch.empty((), dtype=torch_dtype(p.dtype)).element_size()
                         for p in task.outputs)
        n = max(1, min(MAX_TASK_SETS, math.ceil(self.options.l2_factor * self.gemm.props["l2_bytes"] / set_bytes),
                       self.options.max_timing_bytes // (2 * set_bytes)))
        sets = [first] + [{k: v.clone() for k, v in first.items()} for _ in range(n - 1)]
        ref = task.compute(upcast_float64(first), sizes)
        contenders: dict[str, Callable[[int], None]] = {}
        outs_by_name = {}
        for entry in entries:
            if results[entry.name]["status"] != "ok":
                continue
            cand = parse_candidate(entry.text, entry.variables)
            kernel = self.gemm._kernel(entry.cubins["NN"], cand.spec.entry)
            outs = [{p.name: torch.empty(p.shape_for(sizes), dtype=torch_dtype(p.dtype), device="cuda")
                     for p in task.outputs} for _ in range(n)]
            for o in outs:
                for t in o.values():
                    t.view(torch.uint8).fill_(0xFF if t.is_floating_point() else 0xA5)
            launches = [self._bind(kernel, cand.spec, task, sizes, sets[i] | outs[i]) for i in range(n)]
            contenders[f"cand:{entry.name}"], touched = tracked(launches)
            outs_by_name[entry.name] = (outs, touched)
        contenders["torch"] = lambda i: task.compute(sets[i], sizes)
        timer = Timer(self.util, n, reps=self.options.reps, target_batch_ms=self.options.target_batch_ms,
                      method=self.options.timing_method)
        stats = timer.time_interleaved(contenders)
        synchronize()
        torch_us = stats["torch"].median_us
        rng = random.Random(seed)
        for name, (outs, touched) in outs_by_name.items():
            res = results[name]
            bad = []
            for i in rng.sample(sorted(touched), min(len(touched), self.options.recheck_sets)):
                for p in task.outputs:
                    ok, why = _compare(outs[i][p.name], ref[p.name], task.atol, task.rtol)
                    if not ok:
                        bad.append(f"set {i} {p.name}: {why}")
            s = stats[f"cand:{name}"]
            res.update({"timing": s.to_dict(), "time_us": s.median_us, "speedup_vs_best": torch_us / s.median_us,
                        "speedup_vs_torch": torch_us / s.median_us})
            if bad:
                res["status"] = "wrong"
                res["error"] = "re-check after timing failed: " + "; ".join(bad[:3])
        return {"baselines": {"torch": {"timing": stats["torch"].to_dict(), "verified": True, "note": "task.compute"}},
                "best_baseline": "torch", "best_baseline_us": torch_us, "n_sets": n, "set_bytes": set_bytes,
                "timing_method": self.options.timing_method, "timer_overhead_us": timer.overhead_us}

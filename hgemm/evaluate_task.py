"""Evaluate candidates for a general kernel task on this process's GPU.

The task itself (a kernels_corpus.tasks.base.KernelTask: ABI, inputs, torch reference, tolerances)
comes with the job; the instrument reads its interface and never looks a task up.

The same guards as for GEMMs, with the task's own ABI: fresh random inputs (several seeds), poisoned
outputs, guard bands around every buffer, inputs checked unchanged, a float64 reference from the
task's torch implementation, shared memory scrubbed before each checked launch; in timing, outputs
that rotate across input draws with checks after every batch, inputs checked unchanged, a fresh-launch
guard (hgemm.rotation) and a re-check of the timed runs' outputs. The timed baseline is the same torch
implementation on the native dtypes. Task kernels may keep module-scope scratch (the seed solutions'
last-block reductions do); the rotation makes any result remembered there a wrong one.
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
from .runtime import ContextLost, LoadedKernel, synchronize
from .rotation import FRESH_RATIO, FRESH_SLACK_US, RotatingOutputs
from .timing import Timer, queued_launch_us, tracked
from .verify import GuardedBuffer, torch_dtype, upcast_float64

CHECK_SEEDS = 3  # independent input draws per verification
MAX_TASK_SETS = 64  # buffer sets for timing; tasks' inputs are cloned, not redrawn, so keep it modest
TASK_DRAWS = 3  # independent input draws among the timing sets
TASK_BATCH_CHECKS = 4  # outputs fully checked after each timed batch (all written ones are checked at random)
SCALAR_CODES = {"int32": "i", "int64": "q", "float32": "f"}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as integers, so that -0.0 against 0.0 or a changed NaN payload counts."""
    return t.view(torch.uint8) if t.element_size() == 1 else t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


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

    def run_problem(self, problem: TaskProblem, task, entries: list[Entry], emit) -> dict:
        """As GemmEvaluator.run_problem, for `task` (the problem's task) at the problem's sizes."""
        if task is None or task.name != problem.task:
            raise ValueError(f"problem {problem.key} needs its task {problem.task!r} with the job, "
                             f"got {getattr(task, 'name', None)!r}")
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
                raise ContextLost(res["error"])
        out = {"problem": problem.to_dict(), "candidates": results, "seed": seed}
        if self.options.timing and any(r["status"] == "ok" for r in results.values()):
            emit("begin", {"index": -1, "phase": "timing"})
            out.update(self._time(task, sizes, entries, results, seed, lambda: emit("alive", {})))
        return out

    def _time(self, task, sizes: dict, entries: list[Entry], results: dict, seed: int, alive) -> dict:
        # a few independent draws, each cloned into several sets: enough sets for a cold L2, and
        # outputs that rotate across draws (hgemm.rotation), so a stale output is a wrong one
        draws = [{n: t.to("cuda") for n, t in task.make_inputs(sizes, torch.Generator().manual_seed((seed ^ 0x5EED) + d)).items()}
                 for d in range(TASK_DRAWS)]
        set_bytes = sum(t.numel() * t.element_size() for t in draws[0].values())
        set_bytes += sum(math.prod(p.shape_for(sizes)) * torch.empty((), dtype=torch_dtype(p.dtype)).element_size()
                         for p in task.outputs)
        n = max(TASK_DRAWS, min(MAX_TASK_SETS, math.ceil(self.options.l2_factor * self.gemm.props["l2_bytes"] / set_bytes),
                                self.options.max_timing_bytes // (2 * set_bytes)))
        content = [i % TASK_DRAWS for i in range(n)]
        sets = [draws[i] if i < TASK_DRAWS else {k: v.clone() for k, v in draws[content[i]].items()} for i in range(n)]
        refs = [task.compute(upcast_float64(d), sizes) for d in draws]
        saved = [{k: v.clone() for k, v in d.items()} for d in draws]
        guarded = self.options.fresh_outputs

        def poisoned_outputs() -> dict:
            outs = {p.name: torch.empty(p.shape_for(sizes), dtype=torch_dtype(p.dtype), device="cuda") for p in task.outputs}
            for t in outs.values():
                t.view(torch.uint8).fill_(0xFF if t.is_floating_point() else 0xA5)
            return outs

        contenders: dict[str, Callable[[int], None]] = {}
        cands = {}
        for entry in entries:
            if results[entry.name]["status"] != "ok":
                continue
            cand = parse_candidate(entry.text, entry.variables)
            kernel = self.gemm._kernel(entry.cubins["NN"], cand.spec.entry)
            outs = [poisoned_outputs() for _ in range(n + 1 if guarded else n)]
            bind = (lambda i, o, kernel=kernel, cand=cand, outs=outs:
                    self._bind(kernel, cand.spec, task, sizes, sets[i] | outs[o]))
            rot, touched = None, None
            if guarded:
                contenders[f"cand:{entry.name}"] = rot = RotatingOutputs(n, bind, content)
            else:
                contenders[f"cand:{entry.name}"], touched = tracked([bind(i, i) for i in range(n)])
            fresh_out = poisoned_outputs()
            fresh = self._bind(kernel, cand.spec, task, sizes, sets[0] | fresh_out)
            cands[entry.name] = {"outs": outs, "rotation": rot, "touched": touched, "fresh": (fresh, fresh_out)}
        contenders["torch"] = lambda i: task.compute(sets[i], sizes)
        rng = random.Random(seed)

        def wrong(outs: dict, d: int) -> str:
            for p in task.outputs:
                ok, why = _compare(outs[p.name], refs[d][p.name], task.atol, task.rtol)
                if not ok:
                    return f"{p.name}: {why}"
            return ""

        def after_batch(name: str, last: bool) -> None:  # each candidate has outputs of its own: checked after timing
            alive()
            c = cands.get(name[5:]) if name.startswith("cand:") else None
            if c is None or c["rotation"] is None:
                return
            rot = c["rotation"]
            for o in rng.sample(sorted(rot.written), min(len(rot.written), TASK_BATCH_CHECKS)):
                why = wrong(c["outs"][o], content[rot.last[o]])
                if why and not rot.failure:
                    rot.failure = f"output {o} (input set {rot.last[o]}): {why}"
            rot.written.clear()
            # an input changed by this candidate's batch: blamed on it, then put back for the others
            for i in sorted(rot.inputs_used):
                for k, t in sets[i].items():
                    if not torch.equal(_bits(t), _bits(saved[content[i]][k])):
                        c["modified_inputs"] = True
                        t.copy_(saved[content[i]][k])
            rot.inputs_used.clear()

        timer = Timer(self.util, n, reps=self.options.reps, target_batch_ms=self.options.target_batch_ms,
                      method=self.options.timing_method, clocks=self.gemm.clocks, sustained_ms=self.options.sustained_ms)
        stats = timer.time_interleaved(contenders, after_batch=after_batch)
        synchronize()
        torch_us = stats["torch"].median_us
        for name, c in cands.items():
            res = results[name]
            written = ({o: i for o, i in enumerate(c["rotation"].last) if i >= 0} if c["rotation"] is not None
                       else {i: i for i in c["touched"]})
            bad = []
            for o in rng.sample(sorted(written), min(len(written), self.options.recheck_sets)):
                why = wrong(c["outs"][o], content[written[o]])
                if why:
                    bad.append(f"output {o} (input set {written[o]}): {why}")
            if c["rotation"] is not None and c["rotation"].failure:
                bad.insert(0, "a timed launch left a wrong result: " + c["rotation"].failure)
            if c.get("modified_inputs"):
                bad.insert(0, "its timed runs modified an input set")
            s = stats[f"cand:{name}"]
            fresh, fresh_out = c["fresh"]
            fresh_us = min(self._fresh_launch_us(fresh, fresh_out) for _ in range(2))
            res["fresh_launch_us"] = fresh_us
            if guarded and s.median_us < FRESH_RATIO * (fresh_us - FRESH_SLACK_US):
                bad.append(f"timed median {s.median_us:.2f} us is under {FRESH_RATIO} of a fresh launch's "
                           f"{fresh_us:.2f} us (less {FRESH_SLACK_US:.0f} us)")
            res.update({"timing": s.to_dict(), "time_us": s.median_us, "speedup_vs_best": torch_us / s.median_us,
                        "speedup_vs_torch": torch_us / s.median_us})
            if bad:
                res["status"] = "wrong"
                res["error"] = "re-check after timing failed: " + "; ".join(bad[:3])
        return {"baselines": {"torch": {"timing": stats["torch"].to_dict(), "verified": True, "note": "task.compute"}},
                "best_baseline": "torch", "best_baseline_us": torch_us, "n_sets": n, "set_bytes": set_bytes,
                "timing_method": self.options.timing_method, "timer_overhead_us": timer.overhead_us,
                "fresh_outputs": guarded}

    def _fresh_launch_us(self, launch: Callable[[], None], outs: dict) -> float:
        """One launch into freshly poisoned outputs, queued behind a spin (see hgemm.timing)."""
        synchronize()
        for t in outs.values():
            t.view(torch.uint8).fill_(0xFF if t.is_floating_point() else 0xA5)
        return queued_launch_us(self.util, launch)

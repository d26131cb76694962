"""Where a kernel's time goes: each seed-family kernel on one shape, a stream-K one beside its whole-tile
twin, timed with the L2 warm (the same inputs every launch) and cold (a 256 MB write between launches),
a stream-K one at the spec's grid and at smaller ones (its split follows gridDim, so any grid is
correct). `SHAPE@torch` runs torch.matmul on the shape instead: under Nsight Compute the kernels cuBLAS
picks show by name beside the family's. `SHAPE@path/to/kernel.cu` runs a candidate file (a family
configuration its variants do not list, as the experiments' make_kernels.py write them).

    python benchmarks/streamk/profile.py 4096x4096x14336@wgmma_128x256x64_c2_s3_g8_stk8_es ... \
        [--grids 132,120] [--out OUT.json]
    ncu --clock-control none --profile-from-start off ... python benchmarks/streamk/profile.py ... --ncu

The first launch on each grid is checked against a float64 product; a wrong one is reported with its
wrong tiles and the sum of k shares (as streamk.cuh splits them on that grid) their elements hold.
With --ncu every kernel is launched once between cudaProfilerStart and Stop (after a warm-up), so
Nsight Compute's counters cover exactly the kernels named. A shape is MxNxK[xBATCH][:TN].
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import sys
from pathlib import Path

import torch

from hgemm.candidate import parse_candidate
from hgemm.cost import family_text, kernel_params, streamk_split
from hgemm.entry import compile_entry
from hgemm.evaluate import GemmEvaluator
from hgemm.params import gemm_param_buffer, workspace_to_zero
from hgemm.problem import Problem
from hgemm.verify import check_output, reference
from kernels_corpus.families import wgmma

REPS = 20


def parse_shape(text: str) -> Problem:
    dims, _, layout = text.partition(":")
    m, n, k, *b = (int(x) for x in dims.split("x"))
    return Problem(m, n, k, b[0] if b else 1, layout or "NN")


def launcher(ev: GemmEvaluator, name: str, problem: Problem, A, B, C):
    """The loaded kernel, its parameters, the spec's (grid, block, smem), its workspace, zeroed once (the
    split-K and stream-K kernels keep it zero), and the part of it to fill before each launch (None for
    those that keep it zero, as the harness does)."""
    text = Path(name).read_text() if name.endswith(".cu") else family_text(name)
    if text is None:
        raise RuntimeError(f"{name}: no seed-family kernel has that name")
    entry, status = compile_entry(Path(name).stem, text, layouts=(problem.layout,))
    if entry is None:
        raise RuntimeError(f"{name}: {status['status']}: {status.get('error', '')[:500]}")
    cand = parse_candidate(text)
    kernel = ev._kernel(entry.cubins[problem.layout], cand.spec.entry)
    env = problem.variables() | {"num_sms": ev.props["num_sms"]}
    ws_bytes = cand.spec.workspace(env)
    W = torch.zeros(max(1, -(-ws_bytes // 2)), dtype=torch.float16, device="cuda") if ws_bytes else None
    dims = ev.launch_setup(kernel, cand.spec, problem)
    fill = workspace_to_zero(cand.spec, problem, W) if cand.spec.zero_each_launch else None
    return kernel, gemm_param_buffer(cand.spec, problem, A, B, C, W, kernel.param_layout), dims, W, fill


def diagnose(C, A, B, ref, problem: Problem, params: dict, grid: int) -> str:
    """Which output tiles are wrong, and for the first one which sum of its k shares (as streamk.cuh
    splits them on this grid) the kernel's output matches best: a share dropped or added twice shows."""
    bm, bn = params["bm"], params["bn"]
    err = (C.double() - ref[0]).abs() > 1e-2 * (ref[0].abs() + 1)
    b_idx, rows, cols = err.nonzero(as_tuple=True)
    tiles = sorted({(int(b), int(r) // bm, int(c) // bn) for b, r, c in zip(b_idx[:100000], rows[:100000], cols[:100000])})
    nk = -(-problem.K // 64)
    total = -(-problem.M // bm) * -(-problem.N // bn) * problem.batch
    rest, ways = streamk_split(params, total, nk, grid) if params.get("streamk") else (0, 1)
    out = [f"  {len(tiles)} wrong tiles of {total} (split {rest}, ways {ways}); first {tiles[:8]}"]
    if tiles and ways >= 2:
        b, tm, tn = tiles[0]
        r0, c0 = tm * bm, tn * bn
        a = A[b, r0:r0 + bm].double()
        bb = (B[b].transpose(0, 1) if problem.layout == "TN" else B[b]).double()[:, c0:c0 + bn]
        bounds = [j * nk // ways * 64 for j in range(ways)] + [problem.K]
        parts = [a[:, bounds[j]:bounds[j + 1]] @ bb[bounds[j]:bounds[j + 1]] for j in range(ways)]
        got = C[b, r0:r0 + bm, c0:c0 + bn].double()
        combos = {"all": sum(parts)} | {f"without share {j}": sum(parts) - parts[j] for j in range(ways)} | \
                 {f"share {j} twice": sum(parts) + parts[j] for j in range(ways)}
        scores = {k: float((got - v).norm() / v.norm()) for k, v in combos.items()}
        out.append("  first wrong tile against sums of its shares: " +
                   ", ".join(f"{k} {v:.3g}" for k, v in sorted(scores.items(), key=lambda kv: kv[1])[:4]))
        # element by element: the sum of shares (each taken 0, 1 or 2 times) each wrong element matches
        bad = (got - sum(parts)).abs() > 1e-2 * (sum(parts).abs() + 1)
        names, cands = [], []
        for mult in itertools.product((0, 1, 2), repeat=ways):
            names.append("".join(str(m) for m in mult))
            cands.append(sum(m * p for m, p in zip(mult, parts)))
        dist = torch.stack([(got - c).abs() for c in cands])
        best = dist.argmin(0)[bad]
        counts = torch.bincount(best, minlength=len(names)).tolist()
        r, c = bad.nonzero(as_tuple=True)
        out.append(f"  {int(bad.sum())} wrong elements; matched share multiplicities: " +
                   ", ".join(f"{n}: {k}" for n, k in zip(names, counts) if k))
        out.append(f"  rows (mod 64) {torch.bincount(r % 64, minlength=64).tolist()}")
        out.append(f"  rows // 64 {torch.bincount(r // 64).tolist()}, cols // 8 {torch.bincount(c // 8).tolist()}")
    return "\n".join(out)


def time_us(run, flush: torch.Tensor | None) -> float:
    """Median of REPS launches, each timed alone; with `flush`, a 256 MB write before each evicts L2."""
    times = []
    for _ in range(REPS):
        if flush is not None:
            flush.fill_(1)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="SHAPE@KERNEL: a seed-family kernel (a stream-K one's twin is "
                    "added), a candidate file (.cu) or torch (torch.matmul)")
    ap.add_argument("--grids", default="", help="grids besides the spec's, comma-separated (stream-K kernels)")
    ap.add_argument("--ncu", action="store_true", help="one launch each between cudaProfilerStart and Stop")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    ev = GemmEvaluator()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for pair in args.pairs:
        shape, _, name = pair.partition("@")
        problem = parse_shape(shape)
        gen = torch.Generator(device="cuda").manual_seed(0)
        A = torch.randn(problem.a_shape, device="cuda", generator=gen).half()
        B = torch.randn(problem.b_shape, device="cuda", generator=gen).half()
        ref = reference(A, B, problem.layout)
        params = kernel_params(name)
        twin = [wgmma.name(wgmma.whole_tile(params))] if params and params.get("streamk") else []
        for kname in [name] + twin:
            label = Path(kname).stem   # a candidate file's kernel by its name
            C = torch.full(problem.c_shape, float("nan"), dtype=torch.float16, device="cuda")
            if kname == "torch":
                b = B.transpose(-1, -2) if problem.layout == "TN" else B
                runs = [(0, functools.partial(torch.matmul, A, b, out=C))]
            else:
                kernel, buf, (grid, block, smem), _, fill = launcher(ev, kname, problem, A, B, C)
                extra = [int(g) for g in args.grids.split(",") if g] if twin and kname == name else []

                def launch(g):  # used before the next kernel rebinds what it reads
                    if fill is not None:
                        fill.zero_()  # timed with the kernel, as the harness times it
                    kernel.launch((g,) + tuple(grid[1:]), block, buf, smem)
                runs = [(g, functools.partial(launch, g)) for g in [grid[0]] + extra]
            for g, run in runs:
                run()
                torch.cuda.synchronize()
                report = check_output(C, *ref, problem.K)
                ok = report.ok
                if not ok:
                    print(f"{shape} {kname} grid {g}: {report.detail}", flush=True)
                    if params:  # a family kernel (torch has none)
                        print(diagnose(C, A, B, ref, problem, kernel_params(kname), g), flush=True)
                if args.ncu:
                    torch.cuda.profiler.start()
                    run()
                    torch.cuda.synchronize()
                    torch.cuda.profiler.stop()
                    continue
                row = {"shape": shape, "kernel": label, "grid": g, "verified": ok,
                       "warm_us": time_us(run, None), "cold_us": time_us(run, flush)}
                rows.append(row)
                print(f"{shape:>18} {label:>40} grid {g:>4} {'ok' if ok else 'WRONG'} "
                      f"warm {row['warm_us']:9.1f} us  cold {row['cold_us']:9.1f} us", flush=True)
    if args.out and rows:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

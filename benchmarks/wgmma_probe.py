"""GPU diagnosis of the wgmma family: which A and B elements each output element actually read.

With A holding an identity pattern and B holding its own row index (then its column index), a correct
kernel returns C[m, n] = B[m % 64, n]; a wrong shared-memory descriptor, TMA box or fragment mapping
shows up as a readable pattern of (k, n) pairs rather than as a max-error figure. Likewise for A with
B an identity. Each variant runs in its own subprocess with a timeout, so a deadlocked mbarrier ring
is reported as `hang` instead of stopping the probe.

Usage (GPU): python -m benchmarks.wgmma_probe --out probe.json [--variants NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

PROBE_TIMEOUT_S = 60


def _run_one(name: str, layout: str) -> dict:
    import torch

    from hgemm.candidate import parse_candidate
    from hgemm.entry import compile_entry
    from hgemm.evaluate import GemmEvaluator
    from hgemm.problem import Problem
    from kernels_corpus.families import wgmma

    params = next(p for p in wgmma.variants() if wgmma.name(p) == name)
    text = wgmma.render(params)
    entry, status = compile_entry(name, text, layouts=(layout,))
    if entry is None:
        return {"status": status["status"], "error": status.get("error", "")[:2000]}
    cand = parse_candidate(text)
    ev = GemmEvaluator()
    bm, bn = params["bm"], params["bn"]
    out = {"status": "ran", "checks": {}}

    def run(problem, A, B):
        C = torch.full(problem.c_shape, float("nan"), dtype=torch.float16, device="cuda")
        kernel = ev._kernel(entry.cubins[layout], cand.spec.entry)
        launch = ev.bind(kernel, cand.spec, problem, A, B, C, None)
        launch()
        torch.cuda.synchronize()
        return C

    def b_storage(kn):  # kn is (batch, K, N): the tensor the kernel receives for this layout
        return kn.contiguous() if layout == "NN" else kn.transpose(1, 2).contiguous()

    # single tile, one k tile: C = B (rows repeated every 64) when A is a stacked identity
    p = Problem(bm, bn, 64, 1, layout)
    eye_a = torch.eye(64, device="cuda").repeat(bm // 64, 1).half().unsqueeze(0)  # (1, bm, 64)
    k_idx = torch.arange(64, device="cuda").view(1, 64, 1).expand(1, 64, bn).half()
    n_idx = torch.arange(bn, device="cuda").view(1, 1, bn).expand(1, 64, bn).half()
    k_read = run(p, eye_a, b_storage(k_idx))[0].float()
    n_read = run(p, eye_a, b_storage(n_idx))[0].float()
    m = torch.arange(bm, device="cuda").view(bm, 1)
    n = torch.arange(bn, device="cuda").view(1, bn)
    ok_b = (k_read == (m % 64).float()) & (n_read == n.float())
    out["checks"]["B_mapping"] = _pattern(ok_b, k_read, n_read, "k", "n")

    # C = A (columns repeated every 64) when B is an identity stacked along N
    eye_b = torch.eye(64, device="cuda").repeat(1, bn // 64).half().unsqueeze(0)  # (1, 64, bn)
    m_idx = torch.arange(bm, device="cuda").view(1, bm, 1).expand(1, bm, 64).half()
    k_idx_a = torch.arange(64, device="cuda").view(1, 1, 64).expand(1, bm, 64).half()
    m_read = run(p, m_idx.contiguous(), b_storage(eye_b))[0].float()
    ka_read = run(p, k_idx_a.contiguous(), b_storage(eye_b))[0].float()
    ok_a = (m_read == m.float()) & (ka_read == (n % 64).float())
    out["checks"]["A_mapping"] = _pattern(ok_a, m_read, ka_read, "m", "k")

    # random data over several tiles, k tiles and a batch: where the wrong elements sit
    for shape in ((2 * bm, 2 * bn, 256, 1), (bm + 8, bn + 8, 200, 2), (4096, 4096, 4096, 1)):
        prob = Problem(*shape, layout)
        gen = torch.Generator(device="cuda").manual_seed(0)
        A = torch.randn(prob.a_shape, device="cuda", generator=gen).half()
        B = torch.randn(prob.b_shape, device="cuda", generator=gen).half()
        Bkn = B if layout == "NN" else B.transpose(1, 2)
        ref = torch.matmul(A.double(), Bkn.double())
        C = run(prob, A, B).double()
        bad = ~((C - ref).abs() <= 1e-2 * ref.abs() + 1e-2 * (prob.K ** 0.5))
        idx = bad.nonzero()
        out["checks"][f"random_{prob.key}"] = {
            "wrong": int(bad.sum()), "of": bad.numel(),
            "rows_mod_bm": sorted({int(r) % bm for r in idx[:4096, 1].tolist()})[:32],
            "cols_mod_bn": sorted({int(c) % bn for c in idx[:4096, 2].tolist()})[:32],
            "batches": sorted({int(b) for b in idx[:, 0].tolist()}),
        }
    return out


def _pattern(ok, first, second, a: str, b: str) -> dict:
    """How many elements read the right operand element, and the first wrong ones as (row, col) -> read."""
    bad = (~ok).nonzero().tolist()[:24]
    return {"correct": int(ok.sum()), "of": ok.numel(),
            "first_wrong": [{"at": (r, c), a: first[r, c].item(), b: second[r, c].item()} for r, c in bad]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", nargs="*", help="wgmma variant names (default: the first of each tile)")
    ap.add_argument("--one", nargs=2, metavar=("NAME", "LAYOUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_run_one(*args.one)))
        return

    from kernels_corpus.families import wgmma

    names = args.variants
    if not names:
        seen, names = set(), []
        for p in wgmma.variants():
            tile = (p["bm"], p["bn"], p["consumers"])
            if tile not in seen:
                seen.add(tile)
                names.append(wgmma.name(p))
    def probe(job: tuple[str, str]) -> dict:
        name, layout = job
        try:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.wgmma_probe", "--out", "-", "--one", name, layout],
                                  check=False, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
            lines = proc.stdout.strip().splitlines()
            return json.loads(lines[-1]) if proc.returncode == 0 and lines else \
                {"status": "crash", "error": (proc.stderr or proc.stdout)[-2000:]}
        except subprocess.TimeoutExpired:
            return {"status": "hang", "error": f"no result in {PROBE_TIMEOUT_S} s"}

    # In parallel: each subprocess mostly waits on nvcc and imports; nothing here is timed.
    jobs = [(name, layout) for name in names for layout in ("NN", "TN")]
    with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1, 10)) as pool:
        outcomes = list(pool.map(probe, jobs))
    results = {}
    for (name, layout), r in zip(jobs, outcomes):
        results[f"{name}/{layout}"] = r
        checks = r.get("checks", {})
        summary = ", ".join(f"{k}: {v.get('correct', v['of'] - v.get('wrong', 0))}/{v['of']}" for k, v in checks.items())
        print(f"{name:28s} {layout}  {r['status']:8s} {summary or r.get('error', '')[:300]}", flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

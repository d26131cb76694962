"""GPU probe: what the wgmma family's epilogue costs, from the same kernel with its C stores skipped.

The variant `nostore` guards the aligned-row store of the register epilogue (the only one taken when N
is even; `store_acc` in hgemm/include/hgemm/epilogue.cuh) with a value no accumulator takes on these
inputs, so the mainloop, the fp16 conversion and the tile schedule stay, and only the global stores go.
Both versions compile from the render with its headers pasted in, the one edit apart. Its results are wrong by design: this probe times it and never verifies it.
Both versions (and torch.matmul, for scale) run back to back on the same inputs, CUDA-event timed over
a batch of launches each (warm L2: the comparison, not the absolute figure, is the point).

Usage (GPU): python -m benchmarks.epilogue_probe --out epilogue.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

SHAPES = [(1, 4096, 4096, 4096), (1, 8192, 8192, 8192), (256, 512, 512, 512), (64, 512, 512, 512),
          (16, 512, 512, 512), (64, 1024, 1024, 1024)]
TILES = [dict(bm=128, bn=256, consumers=2, stages=4, group_m=8), dict(bm=256, bn=128, consumers=2, stages=4, group_m=8)]
STORE = "if (c < N) *reinterpret_cast<__half2*>(crow + c) ="
NOSTORE = "if (c < N && acc[mt][4 * j + 2 * h] == 1.5e-7f) *reinterpret_cast<__half2*>(crow + c) ="
INCLUDE = Path(__file__).resolve().parents[1] / "hgemm" / "include"
_INCLUDE_LINE = re.compile(r'\s*#include\s+(?:<(hgemm/[^>]+)>|"([^"]+)")')


def inline_headers(text: str) -> str:
    """A candidate with the hgemm headers it includes pasted in, each once, where it is first included."""
    seen = set()

    def expand(src: str, here: Path) -> str:
        out = []
        for line in src.splitlines():
            m = _INCLUDE_LINE.match(line)
            if m:
                path = (INCLUDE / m.group(1) if m.group(1) else here / m.group(2)).resolve()
                if path not in seen:
                    seen.add(path)
                    out.append(expand(path.read_text(), path.parent))
            elif line.strip() != "#pragma once":
                out.append(line)
        return "\n".join(out)

    return expand(text, INCLUDE)


def _time_us(fn, launches: int) -> float:
    import torch

    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / launches


def main() -> None:
    import torch

    from hgemm.candidate import parse_candidate
    from hgemm.entry import compile_entry
    from hgemm.envinfo import environment
    from hgemm.evaluate import GemmEvaluator
    from hgemm.problem import Problem
    from kernels_corpus.families import wgmma

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ev = GemmEvaluator()
    rows = []
    for params in TILES:
        text = inline_headers(wgmma.render(params))
        assert text.count(STORE) == 1, "the aligned-row store moved: update STORE"
        kernels = {}
        for label, src in (("plain", text), ("nostore", text.replace(STORE, NOSTORE))):
            entry, status = compile_entry(f"{wgmma.name(params)}_{label}", src, layouts=("NN",))
            assert entry is not None, status
            cand = parse_candidate(src)
            kernels[label] = (ev._kernel(entry.cubins["NN"], cand.spec.entry), cand.spec)
        for batch, m, n, k in SHAPES:
            prob = Problem(m, n, k, batch, "NN")
            if not wgmma.applicable(params, prob):
                continue
            gen = torch.Generator(device="cuda").manual_seed(0)
            A = torch.randn(prob.a_shape, device="cuda", generator=gen).half()
            B = torch.randn(prob.b_shape, device="cuda", generator=gen).half()
            C = torch.empty(prob.c_shape, device="cuda", dtype=torch.float16)
            launches = max(10, int(2e5 / (2 * batch * m * n * k / 700e6)))   # ~200 ms of work at 700 TFLOP/s
            row = {"tile": wgmma.name(params), "problem": prob.to_dict(), "launches": launches}
            for label, (kernel, spec) in kernels.items():
                row[label + "_us"] = _time_us(ev.bind(kernel, spec, prob, A, B, C, None), launches)
            row["torch_us"] = _time_us(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C), launches)
            rows.append(row)
            print(f"{row['tile']:28s} b{batch} {m}x{n}x{k}: plain {row['plain_us']:8.1f}  nostore {row['nostore_us']:8.1f}"
                  f"  ({1 - row['nostore_us'] / row['plain_us']:5.1%} in the stores)  torch {row['torch_us']:8.1f} us")
    with open(args.out, "w") as f:
        json.dump({"environment": environment(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

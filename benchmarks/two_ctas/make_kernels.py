"""Write the wgmma kernels of the two-CTAs-an-SM experiment into a folder (default
results/two_ctas/kernels): each
one-consumer tile whose shared memory lets two CTAs share an SM (at most ~113 KB each), as the family
renders it (a persistent grid of one CTA an SM) and with a grid of two CTAs an SM (`_x2`), the same
kernel otherwise. `hgemm bench --kernels results/two_ctas/kernels` times both on each shape;
`python benchmarks/variant_pairs.py BENCH_JSON _x2` prints the pairs.

Usage: python benchmarks/two_ctas/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma

# (bm, bn, stages): the ring shallow enough that two CTAs' dynamic shared memory fits an SM's 228 KB
TILES = [(64, 64, 6), (64, 64, 4), (64, 128, 3), (128, 64, 3)]
SM_SMEM = 228 * 1024


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for bm, bn, stages in TILES:
        params = {"bm": bm, "bn": bn, "consumers": 1, "stages": stages, "group_m": 8, "epilogue": "smem"}
        name, text = wgmma.name(params), wgmma.render(params)
        smem = int(next(line for line in text.splitlines() if line.startswith("smem:")).split(":")[1])
        # per CTA: its dynamic smem, the kernel's static barriers (1 KB) and the 1 KB the SM reserves
        assert 2 * (smem + 2048) <= SM_SMEM, f"{name}: two CTAs do not fit an SM"
        one_grid = f"grid: min(num_sms, cdiv(M, {bm}) * cdiv(N, {bn}) * batch)"
        assert one_grid in text, name
        assert "__launch_bounds__(256, 1)" in text, name
        # the grid of two CTAs an SM, and the bound that keeps ptxas within half the register file
        two = (text.replace(one_grid, one_grid.replace("min(num_sms,", "min(2 * num_sms,"))
               .replace("__launch_bounds__(256, 1)", "__launch_bounds__(256, 2)").replace(name, name + "_x2"))
        (out / f"{name}.cu").write_text(text)
        (out / f"{name}_x2.cu").write_text(two)
        print(name, smem)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/two_ctas/kernels"))

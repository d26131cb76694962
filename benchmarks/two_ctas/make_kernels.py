"""Write the wgmma kernels of the two-CTAs-an-SM experiment into a folder (default
results/two_ctas/kernels): each one-consumer tile whose shared memory lets two CTAs share an SM, as the
family renders it at one CTA an SM and at two (`ctas_per_sm: 2`), the latter named after the former with
`_x2` appended. `hgemm bench --kernels results/two_ctas/kernels` times both on each shape;
`python benchmarks/variant_pairs.py BENCH_JSON _x2` prints the pairs.

Usage: python benchmarks/two_ctas/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma

# (bm, bn, stages): the ring shallow enough that two CTAs' shared memory fits an SM
TILES = [(64, 64, 6), (64, 64, 4), (64, 128, 3), (128, 64, 3)]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for bm, bn, stages in TILES:
        one = {"bm": bm, "bn": bn, "consumers": 1, "stages": stages, "group_m": 8, "epilogue": "smem"}
        two = dict(one, ctas_per_sm=2)
        assert wgmma._valid(two), f"{wgmma.name(one)}: two CTAs do not fit an SM"
        name = wgmma.name(one)
        (out / f"{name}.cu").write_text(wgmma.render(one))
        (out / f"{name}_x2.cu").write_text(wgmma.render(two).replace(wgmma.name(two), name + "_x2"))
        print(name)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/two_ctas/kernels"))

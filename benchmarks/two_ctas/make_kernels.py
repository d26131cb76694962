"""Write the wgmma kernels of the two-CTAs-an-SM experiment into a folder (default
results/two_ctas/kernels): each one-consumer tile whose shared memory lets two CTAs share an SM, as the
family renders it at one CTA an SM and at two (`ctas_per_sm: 2`), the latter named after the former with
`_x2` appended, and the one-CTA kernels the default grid's search picked where these tiles compete
(REFERENCES). `hgemm bench --kernels results/two_ctas/kernels` times them on each shape;
`python benchmarks/variant_pairs.py BENCH_JSON _x2` prints the pairs.

Usage: python benchmarks/two_ctas/make_kernels.py [OUT_DIR]
"""

import sys
from pathlib import Path

from kernels_corpus.families import wgmma, write_kernels

# (bm, bn, stages, epilogue): the ring shallow enough that two CTAs' shared memory fits an SM; 128 x 128
# only with the register epilogue (a parked tile leaves no room for a ring of three twice)
TILES = [(64, 64, 6, "smem"), (64, 64, 4, "smem"), (64, 128, 3, "smem"), (128, 64, 3, "smem"),
         (128, 128, 3, "registers")]
# the default grid's search's one-CTA picks on the batched 128 x 128 shapes and the cubes
# (benchmarks/default_search/)
REFERENCES = [dict(bm=128, bn=128, consumers=1, stages=5, group_m=8, epilogue="smem"),
              dict(bm=128, bn=256, consumers=2, stages=3, group_m=8, epilogue="smem")]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for bm, bn, stages, epilogue in TILES:
        one = {"bm": bm, "bn": bn, "consumers": 1, "stages": stages, "group_m": 8}
        if epilogue == "smem":
            one["epilogue"] = "smem"
        two = dict(one, ctas_per_sm=2)
        # the family's variants, and 128 x 128 (no variant: benchmarks/two_ctas/README.md)
        assert wgmma.sm_holds(two), f"{wgmma.name(one)}: two CTAs do not fit an SM"
        name = wgmma.name(one)
        write_kernels(wgmma, [one], out)
        (out / f"{name}_x2.cu").write_text(wgmma.render(two).replace(wgmma.name(two), name + "_x2"))
        print(name)
    write_kernels(wgmma, REFERENCES, out)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/two_ctas/kernels"))

"""Hopper HGEMM family: wgmma.mma_async + TMA + mbarrier pipeline + warp specialisation (sm_90a only).

The kernel is `hgemm::sm90::wgmma_gemm` in the device headers (hgemm/include/hgemm/wgmma_gemm.cuh and
the pieces it includes; docs/headers-wgmma.md); this module holds its parameter space, names, launch
spec and applicability, and renders a variant as the include, the spec and one `extern "C"` entry that
instantiates the template.

A persistent grid (one CTA an SM) walks BM x BN output tiles in grouped order (GROUP_M tile rows
column by column). Warpgroup 0 produces: one thread issues TMA loads into a STAGES-deep ring of
128B-swizzled stages; the CONSUMERS other warpgroups issue wgmma m64nBNk16 straight from shared memory.
Options: `cluster: 2` (clusters of two CTAs on vertically adjacent tiles, B multicast into both; with
`multicast: A`, on horizontally adjacent tiles, A multicast into both),
`epilogue: smem` (finished tiles parked in shared memory and stored by the producer warpgroup's idle
warps), `epilogue: bulk` (each consumer warp parks its own rows and copies them to C with cp.async.bulk),
`epilogue: bulk_tensor` (the same rows stored by TMA tensor stores through a C tensor map) or the register
epilogue, `split_k: 2 | 4 | 8` (clusters of that many CTAs on one tile, each over a
share of K, reducing through distributed shared memory), `streamk: 8` (the tiles past the last whole wave
shared out over the grid by k tile, each split over at most that many CTAs, reducing through the
workspace), `ctas_per_sm: 2` (a grid of two CTAs an SM, for the one-consumer tiles that fit twice), and
`loader: staged` with `stage: AB | A | B` (the grid first copies
the operands whose row pitches TMA refuses into padded rows in its workspace; TMA reads those).

Layouts: both from one text (-DHGEMM_LAYOUT_TN picks). Shapes: TMA needs 16-byte row pitches (K % 8 ==
0 for A and TN-B, N % 8 == 0 for NN-B); the staged variants serve exactly the others. M, N and K need
not be multiples of the tile: TMA zero-fills out-of-range rows and columns, and the epilogues predicate
C stores.
"""

from __future__ import annotations

import functools
import itertools

from hgemm.params import STAGED_PITCH, operand_shape
from hgemm.problem import NUM_SMS

SMEM_LIMIT = 227 * 1024
STATIC_SMEM = 1024          # the mbarriers, as ptxas reports them (the 1024-byte alignment rounds them up)
BK = 64                     # one 128-byte swizzle row of fp16: the K extent of a stage
BOX_BYTES = 64 * 64 * 2     # one 64 x 64 fp16 TMA box

# (BM, BN, CONSUMERS): each consumer warpgroup owns WM = BM / CONSUMERS rows (1 or 2 m64 atoms)
# and all BN columns; accumulators per thread = (WM / 64) * BN / 2 <= 128.
TILES = [
    (128, 256, 2),   # 2 x (64 x 256): the large-shape workhorse
    (256, 128, 2),   # 2 x (128 x 128)
    (128, 192, 2),   # 2 x (64 x 192): fewer idle SMs in the last wave where 128x256 leaves many
    (128, 128, 2),   # 2 x (64 x 128)
    (128, 128, 1),   # 1 x (128 x 128)
    (128, 64, 2),    # 2 x (64 x 64): chains of half the length, the epilogue split in two; 1.02-1.05x the one
                     # consumer on 1024³, 256 x 4096 x 4096 and b4 1024³, 0.91-0.97x on 512³ and b16 256³, where
                     # 64 x 64 tiles fill more SMs (benchmarks/two_consumer_128x64/, H100)
    (128, 64, 1),    # 1 x (128 x 64): more tiles for mid-size problems
    (64, 256, 1),    # 1 x (64 x 256), 1 x (64 x 128): M <= 64 (skinny, decode-like), where a 128-row
    (64, 128, 1),    # tile doubles the tensor work on rows TMA zero-fills; B streams through the same ring
    (64, 64, 1),     # 1 x (64 x 64): tiny batched problems, and with split-K the few-tile long-K ones
]
STAGES = (3, 4, 5, 6)
GROUP_M = (8,)
# The staged loader (TMA from padded copies of A and B that the grid makes in its workspace) serves the
# pitches TMA refuses: 2.7-3.1x loading and realigning rows in producer warpgroups at 4096 sizes
# (benchmarks/misaligned_loaders/). In the tuned library 128x256 wins from 2047^3 up (128x192 on
# 2049^3), 128x128 with 6 stages on 1023^3 and 1025^3.
# The +1 cubes lose a round to the tile schedule (4097^3: 561 128x256 tiles are 5 rounds on
# 132 SMs, 4.25 of work); 128x192 tiles fill them better (726 tiles, 6 rounds of 3/4 the work: 4.5).
# It ties with 128x256 in hgemm.tune.estimate there, and ties go to the earlier tile: second in the list.
STAGED = [(128, 256, 2, 4), (128, 192, 2, 5), (256, 128, 2, 4), (128, 128, 2, 6)]  # (BM, BN, CONSUMERS, STAGES)
# Where only one operand's rows are refused (one odd dimension: K in NN copies A, N in NN copies B), a
# kernel that copies only that one (`stage: A` or `B`): 4096x4096x4095 in 202.8 us and 4096x4095x4096
# in 212.5 (benchmarks/tune/). The grid's such shapes are 4096-sized, so the large tiles only.
STAGED_ONE = [(128, 256, 2, 4), (256, 128, 2, 4)]
# Clusters of 2 CTAs on vertically adjacent tiles, which TMA multicasts their shared B tile to
# (`cluster: 2`): each SM then pulls 2/3 of the operand bytes from L2 a k-step on 128x256 tiles (16 KB
# of A + half of B's 32 KB), 5/6 on 256x128. Measured (benchmarks/cluster/): 0.94-1.01x the plain
# 128x256 on 128-byte row pitches, so L2-to-SM traffic is not what holds it below cuBLAS; but
# 1.16-1.44x where rows are 16-byte and not 128-byte multiples (8192x8200x8200: 2427 -> 1682 us,
# cuBLAS 1612). 256x128 (0.92-0.95x) and 128x192 (0.81-0.91x: its 3 boxes split 2:1) lose everywhere
# but on those pitches, and the staged copies (128-byte pitches already) gain 0-3%: 128x256 only.
CLUSTERED = [(128, 256, 2)]
# The epilogue through shared memory (`epilogue: smem`): the consumers park a finished tile in smem and
# start the next while the producer warpgroup's idle warps store it. Against the register epilogue on
# the same tiles (benchmarks/epilogue/), one ring stage shallower where the parked tile needs the room:
# 128x256 1.03-1.14x on single GEMMs (4096^3: 207.5 -> 190.6 us, cuBLASLt 187.1) and 1.12-1.44x
# batched; 8192^3 1569 us against cuBLASLt's 1586; staged odd-N shapes 1.01-1.07x, element stores and
# all. Every tile takes it but 128x128 with two consumers, which loses on single GEMMs (0.83-0.94x) and
# wins batched (1.10-1.27x): that one keeps both.
# The bulk-copy epilogue (`epilogue: bulk`): each consumer warp parks its own rows and copies each to C
# with one cp.async.bulk, no hand-over to the producer's warps. Every two-consumer tile has it beside the
# parked form at the same ring (epilogue_twin); one-consumer tiles lose with it (0.72-1.08x: a warp's
# copies issue one lane at a time on the only consumer's path; benchmarks/bulk_store/).
# The TMA tensor stores (`epilogue: bulk_tensor`): the same parked rows as 16 x 64 swizzled boxes, one
# store a box through a C tensor map, where the bulk copies take one a row. On every two-consumer tile
# they ran 1.10-1.24x the bulk copies on four short-K shapes and 1.02-1.07x on 2048³ and b4 1024³
# (benchmarks/short_k_stores/). A one-consumer warp issues 2-4 of them a tile where the bulk copies take
# 32-64. Against the parked epilogue on the one-consumer tiles, two CTAs an SM among them, 0.99-1.19x
# (1.057x in geomean over 56 tile-shape pairs; 1.16-1.19x on 128 x 128 and 64 x 256 on the many-tile 512³,
# b4 512³ and b16 256³; benchmarks/one_consumer_stores/). Every tile with the parked epilogue has them
# beside it at the same ring (tensor_twin), where C's rows are 16-byte aligned.
BOTH_EPILOGUES = [(128, 128, 2)]
# Split-K across a cluster (`split_k: 2 | 4 | 8`, hgemm/cluster_splitk.cuh): SPLITK CTAs compute one tile over
# shares of K and reduce-scatter their fp32 accumulators through distributed shared memory, so a problem
# with fewer tiles than SMs and a long K (1024 x 512 x 12288: 32 tiles of 128 x 128 on 132 SMs) keeps every
# SM busy without a workspace, atomics or a second pass. The reduction moves (SPLITK - 1) / SPLITK of a
# tile's fp32 accumulators per CTA, once a tile, against a mainloop of K / SPLITK: at K = 4096 and
# SPLITK = 4, 48 KB against 16 k tiles of 32 KB. Each CTA stores its share of the tile from registers.
# The two deepest rings that fit beside the reduction buffer.
# The 64-row tiles: skinny problems (M <= 64) and, 64 x 64, long K on a handful of tiles (128 x 512 x 7616
# is 8 tiles of 128 x 64 and 16 of 64 x 64: 128 CTAs at split 8, each with half the mainloop work).
SPLIT_TILES = [(128, 128, 1), (128, 64, 1), (128, 128, 2), (256, 128, 2), (128, 256, 2), (64, 256, 1), (64, 128, 1),
               (64, 64, 1)]
SPLITS = (2, 4, 8)
# Split-K behind the staged loader, for the same few-tile long-K problems where a row pitch is one TMA
# refuses (odd K, or odd N in NN: 52 of the shape sample's 255 fitting shapes are such, and 14 of its
# 65 held-out ones). The two one-consumer tiles that won split shapes of the sample tune, at their
# deepest ring, copying both operands or either one.
STAGED_SPLIT_TILES = [(128, 128, 1), (128, 64, 1)]
# The staged loader's grid barrier needs every CTA resident at once, so a staged split grid holds no
# more clusters than the GPU runs together: the H200 holds 66 clusters of 2, 30 of 4 and 15 of 8
# (benchmarks/split_k/cluster_occupancy.json); 7/8 of the SMs in clusters of 4 or 8 is 28 and 14 of
# them, inside those. A GPU whose GPCs hold fewer traps at the barrier after ~1 s (a crash, no hang).
def staged_split_clusters(split: int) -> str:
    return "num_sms // 2" if split == 2 else f"num_sms * 7 // 8 // {split}"
# Stream-K over the last partial wave (`streamk: WAYS`, hgemm/streamk.cuh): a grid of num_sms CTAs runs
# the whole waves of tiles as before and splits each of the rest by k in equal shares over the CTAs
# that round would leave idle, at most WAYS and no finer than STREAMK_MIN_UNITS k tiles a CTA; the CTA
# of a split tile's first share adds the others' fp32 partials from the workspace and stores it. Where
# the last round holds a few tiles (2455 x 3840 x 7680 in 128 x 192 tiles: 400 on 132 SMs, 4 in the
# last) the persistent kernel runs a whole round for them; split 8 ways, an eighth of one. Few tiles
# and a long K are all remainder: split-K by up to WAYS, whatever the tile count.
STREAMK_TILES = [(128, 256, 2), (128, 192, 2), (128, 128, 2), (128, 128, 1), (128, 64, 1), (64, 128, 1), (64, 64, 1)]
# Behind the staged loader, for the pitches TMA refuses (odd K, or odd N in NN: TN nn.Linear shapes with
# an odd dimension among them): the one-consumer 128 x 128 and 128 x 64 tiles, copying both operands or
# either one. The 128 x 64 tile is the cluster split-K's winner on few long-K tiles; its stream-K form
# copies on every SM where the split grid copies on 7/8 of them (staged_split_clusters): on an H200,
# where the first-call search kept it, 0.93-1.02x the split kernel's time, 0.76x on 647 x 320 x 10317
# (benchmarks/staged_ways/).
# The two-consumer tiles spill there (8 bytes: ptxas keeps the copy loop's 64-bit thread index through
# the kernel at their 168 registers), so they are left out.
STREAMK_STAGED_TILES = [(128, 128, 1), (128, 64, 1)]
STREAMK_WAYS = 8
STREAMK_MIN_UNITS = 4   # StreamKTiles::MIN_UNITS in hgemm/streamk.cuh
# Two CTAs an SM (`ctas_per_sm: 2`): the persistent grid min(2 * num_sms, tiles). One consumer warpgroup
# of these tiles holds 64-109 registers a thread, and rings of 3-6 stages fit two CTAs' shared memory in
# an SM's 228 KB, so two of them run on each SM: one's pipeline fill, tile hand-over and epilogue under
# the other's mainloop. Against one CTA an SM at the same ring (benchmarks/two_ctas/, H100) 1.04-1.17x on
# the batched small shapes and 1.25-1.63x where a CTA walks two tiles or more of a long K (b16 512^3
# 20.6 -> 15.5 us, 256 x 4096 x 4096 32.3 -> 22.5); the same time where the tiles are no more than the
# SMs. Against the best one-CTA kernel of any tile they win 7 of the default grid's 16 slowest shapes, the
# batched small ones, and lose to deeper rings and two consumers on the large (benchmarks/default_search/).
# 128 x 128 fits twice only at 3 stages with the register epilogue (its 128 accumulators a thread from the
# producer's registers, CTAS_PER_SM in the template): 1.18-1.27x its one-CTA twin on 2048^3, 4096^3 and
# b4 1024^3 (0.88x on b64 256^3 and b256 128^3), but slower than the one-CTA 128 x 128 with 5 stages and
# the parked epilogue on every shape of benchmarks/two_ctas/, so it is no variant.
TWO_CTA_TILES = [(64, 64, 1), (64, 128, 1), (128, 64, 1)]
SM_SMEM = 228 * 1024        # shared memory an SM shares out among its CTAs, 1 KB of each reserved
_G = dict(group_m=8, epilogue="smem")
# The smem epilogue on each kind of tile and loader, at the ring depth benchmarks/epilogue/ measured
# (the GPU tests run them all)
EPILOGUE_SMEM_PROBE = [
    dict(bm=128, bn=256, consumers=2, stages=3, **_G), dict(bm=256, bn=128, consumers=2, stages=3, **_G),
    dict(bm=128, bn=192, consumers=2, stages=4, **_G), dict(bm=128, bn=128, consumers=2, stages=5, **_G),
    dict(bm=128, bn=128, consumers=1, stages=5, **_G), dict(bm=128, bn=64, consumers=1, stages=6, **_G),
    dict(bm=128, bn=256, consumers=2, stages=3, cluster=2, **_G),
    dict(bm=128, bn=256, consumers=2, stages=3, loader="staged", stage="AB", **_G),
    dict(bm=128, bn=256, consumers=2, stages=3, loader="staged", stage="B", **_G),
]


def _stage_bytes(p: dict) -> int:
    return (p["bm"] + p["bn"]) * BK * 2


def _epilogue_smem(p: dict) -> bool:
    # `epilogue: smem`: the consumers park finished tiles in smem and the producer warpgroup's idle
    # warps store them, so the stores overlap the next tile's mainloop
    return p.get("epilogue", "registers") == "smem"


def _epilogue_last(p: dict) -> bool:
    # `epilogue: last`: from registers, but a CTA's last tile parked in the ring it no longer needs and
    # stored by those warps (Epilogue::last_parked): no parked buffer, so the ring has that room
    return p.get("epilogue", "registers") == "last"


def _epilogue_bulk(p: dict) -> bool:
    # `epilogue: bulk`: each consumer warp parks its own rows of a finished tile and the bulk-copy engine
    # stores them (Epilogue::bulk): no hand-over to storer warps; the parked buffer as `smem` has it.
    # `epilogue: bulk_tensor` the same by TMA tensor stores of 16 x 64 boxes (_tensor_stores)
    return p.get("epilogue", "registers") in ("bulk", "bulk_tensor")


def _tensor_stores(p: dict) -> bool:
    # `epilogue: bulk_tensor` (Epilogue::bulk_tensor): a C tensor map, so C's rows 16-byte aligned
    return p.get("epilogue", "registers") == "bulk_tensor"


def _parked_bytes(p: dict) -> int:
    # a parked C tile: rows padded by 16 bytes (ParkedTile in hgemm/epilogue.cuh)
    return p["bm"] * (p["bn"] * 2 + 16)


def _smem_bytes(p: dict) -> int:
    # + 1024: the kernel rounds the dynamic smem base up to the 1024-byte swizzle-pattern boundary;
    # the parked epilogue's buffer follows the ring.
    parked = _parked_bytes(p) if _epilogue_smem(p) or _epilogue_bulk(p) else 0
    # split-K: a slot for each peer's partials of this CTA's share of the tile (ClusterSplitK::kBytes)
    split = _split(p)
    reduce = (split - 1) * p["bm"] * p["bn"] * 4 // split
    return p["stages"] * _stage_bytes(p) + parked + reduce + 1024


def sm_holds(p: dict) -> bool:
    """The shared memory of the variant's CTAs an SM (`ctas_per_sm`), each with its barriers and the
    1 KB the SM reserves for it, within the SM's."""
    return _ctas_per_sm(p) * (_smem_bytes(p) + STATIC_SMEM + 1024) <= SM_SMEM


def _valid(p: dict) -> bool:
    bm, bn, c = p["bm"], p["bn"], p["consumers"]
    wm = bm // c
    ctas = _ctas_per_sm(p)
    return (
        bm % c == 0 and c in (1, 2) and wm in (64, 128) and bn % 64 == 0 and 64 <= bn <= 256
        and (wm // 64) * bn // 2 <= 128
        and _smem_bytes(p) + STATIC_SMEM <= SMEM_LIMIT
        and sm_holds(p)
        and (ctas == 1 or ((bm, bn, c) in TWO_CTA_TILES and _plain(p)))
        and 3 <= p["stages"] <= 6
        and _cluster(p) in (1, 2)
        and _multicast(p) in ("A", "B") and (_multicast(p) == "B" or _cluster(p) > 1)
        and _split(p) in SPLITS + (1,)
        and (_split(p) == 1 or (_cluster(p) == 1 and not _epilogue_smem(p)))
        and (not _streamk(p) or (_split(p) == 1 and _cluster(p) == 1))
        and (not _epilogue_bulk(p) or (_split(p) == 1 and not _streamk(p)))
        # B alone is copied where its rows are N long and refused (NN, N % 8 != 0): C's then are too
        and not (_tensor_stores(p) and _staged_ops(p) == "B")
        and (not _epilogue_last(p) or (_whole_tiles(p) and ctas == 1 and p["stages"] * _stage_bytes(p) >= _parked_bytes(p)))
    )


def _epilogues(p: dict) -> list[dict]:
    """p with each epilogue its tile takes: the smem one (first: ties in the tune's shortlist go to the
    earlier), for BOTH_EPILOGUES the register one as well, with two consumers the bulk copies, and the
    tensor stores."""
    out = [dict(p, epilogue="smem")]
    if (p["bm"], p["bn"], p["consumers"]) in BOTH_EPILOGUES:
        out.append(dict(p))
    if p["consumers"] == 2:
        out.append(dict(p, epilogue="bulk"))
    return out + [dict(p, epilogue="bulk_tensor")]


def epilogue_twin(p: dict) -> dict | None:
    """A two-consumer variant with the other of the parked and the bulk-copy epilogues (same tile, ring,
    cluster and loader); None for any other. The bulk copies ran 1.04-1.18x the parked epilogue on
    one-wave grids and 0.96-1.10x on many (benchmarks/bulk_store/), which no term of the estimate or the
    cost model tells apart: the tune's shortlist and the first-call search time both."""
    return _two_consumer_form(p, "bulk" if _epilogue_smem(p) else "smem")


def tensor_twin(p: dict) -> dict | None:
    """The tensor-store form (`epilogue: bulk_tensor`) of a variant with the parked epilogue, or of a
    two-consumer one with the bulk copies (same tile, ring, CTAs an SM, cluster and loader); None for any
    other. The cost model ranks only what its tunes timed, so the first-call search times it beside its
    first such kernels (hgemm.tune.tensor_store_siblings)."""
    if p["consumers"] == 1 and p.get("epilogue") == "smem" and not _streamk(p):
        twin = dict(p, epilogue="bulk_tensor")
        return twin if _valid(twin) else None
    return _two_consumer_form(p, "bulk_tensor")


def _two_consumer_form(p: dict, epilogue: str) -> dict | None:
    # p, a two-consumer variant with the parked or the bulk-copy epilogue, with `epilogue` instead, where valid
    if p["consumers"] != 2 or p.get("epilogue") not in ("smem", "bulk"):
        return None
    twin = dict(p, epilogue=epilogue)
    return twin if _valid(twin) else None


def variants() -> list[dict]:
    out = []
    staged = [(tile, "AB") for tile in STAGED] + [(tile, op) for tile in STAGED_ONE for op in "AB"]
    for ((bm, bn, c, st), ops), g in itertools.product(staged, GROUP_M):
        for p in _epilogues(dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=g, loader="staged", stage=ops)):
            while p["stages"] > 3 and not _valid(p):   # the parked tile takes ring room
                p["stages"] -= 1
            if _valid(p):
                out.append(p)
    tiles = [(t, 1) for t in TILES] + [(t, 2) for t in CLUSTERED]
    for ((bm, bn, c), cl), st, g in itertools.product(tiles, STAGES, GROUP_M):
        p = dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=g)
        if cl > 1:
            p["cluster"] = cl
        # Deep rings only where a stage is small; 48 KB stages fit 4 at most.
        if _stage_bytes(p) >= 48 * 1024 and st > 4:
            continue
        if _stage_bytes(p) <= 24 * 1024 and st < 4:
            continue
        out += [q for q in _epilogues(p) if _valid(q)]
    for (bm, bn, c), epilogue in itertools.product(TWO_CTA_TILES, ("smem", "bulk_tensor", "registers")):
        # the two deepest rings that fit twice, with each epilogue (a parked tile takes ring room)
        out += _deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, ctas_per_sm=2,
                                        **({} if epilogue == "registers" else {"epilogue": epilogue})), 2)
    for (bm, bn, c), split in itertools.product(SPLIT_TILES, SPLITS):
        out += _deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, split_k=split), 2)
    for (bm, bn, c), split, ops in itertools.product(STAGED_SPLIT_TILES, SPLITS, ("AB", "A", "B")):
        out += _deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, group_m=8, split_k=split,
                                        loader="staged", stage=ops), 1)
    for bm, bn, c in STREAMK_TILES:
        out += _deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, streamk=STREAMK_WAYS, **_G), 1)
    for (bm, bn, c), ops in itertools.product(STREAMK_STAGED_TILES, ("AB", "A", "B")):
        out += _deepest(lambda st: dict(bm=bm, bn=bn, consumers=c, stages=st, streamk=STREAMK_WAYS, loader="staged",
                                        stage=ops, **_G), 1)
    return out


def streamk_sibling(p: dict) -> dict | None:
    """The stream-K variant of a variant's tile, consumers and loader (its own ring depth and the smem
    epilogue; whatever the variant's cluster or split-K); None for a stream-K variant or a tile with
    none. The tune's shortlist and the first-call search time it beside their first wgmma tiles
    (hgemm.tune.streamk_siblings): where the last round is part-filled or the tiles are few it can win by
    a margin (benchmarks/streamk/: 10 of 42 shapes against the pipeline library's choice)."""
    if _streamk(p):
        return None
    key = (p["bm"], p["bn"], p["consumers"], p.get("loader", "tma"), _staged_ops(p))
    return next((dict(v) for v in _streamk_variants()
                 if (v["bm"], v["bn"], v["consumers"], v.get("loader", "tma"), _staged_ops(v)) == key), None)


def whole_tile(p: dict) -> dict:
    """The whole-tile kernel a stream-K variant extends: the same tile, ring, epilogue and loader."""
    return {k: v for k, v in p.items() if k != "streamk"}


@functools.lru_cache(maxsize=1)
def _streamk_variants() -> tuple[dict, ...]:
    return tuple(v for v in variants() if _streamk(v))


def _deepest(variant, n: int) -> list[dict]:
    """variant(stages) at the n deepest ring depths that fit (split-K's reduction buffer takes ring room)."""
    return [p for st in STAGES if _valid(p := variant(st))][-n:]


def _staged(p: dict) -> bool:
    # TMA from padded copies the kernel makes in its workspace (loader: staged), for the pitches TMA
    # refuses. Its grid waits at a barrier for every CTA's copies, so all num_sms CTAs must be resident
    # at once: one CTA an SM, on a GPU no other kernel holds (a grid that cannot be traps after ~1 s).
    return p.get("loader", "tma") == "staged"


def _staged_ops(p: dict) -> str:
    # the operands a staged kernel copies: "AB" (the default), or only "A" or "B", where the other
    # operand's rows are TMA-legal and copying it would cost time for nothing
    return p.get("stage", "AB") if _staged(p) else ""


def _cluster(p: dict) -> int:
    # CTAs per cluster (vertically adjacent tiles sharing B by TMA multicast); 1: no clusters
    return p.get("cluster", 1)


def _multicast(p: dict) -> str:
    # the operand a cluster's CTAs share: "B" (vertically adjacent tiles), or "A" (horizontally adjacent)
    return p.get("multicast", "B")


def _split(p: dict) -> int:
    # CTAs of a cluster sharing one tile's K (cluster split-K); 1: none
    return p.get("split_k", 1)


def _ctas_per_sm(p: dict) -> int:
    # CTAs of the persistent grid an SM (its size min(ctas * num_sms, tiles)); 1: one an SM
    return p.get("ctas_per_sm", 1)


def _whole_tiles(p: dict) -> bool:
    # one CTA a whole tile: no clusters, split-K or stream-K
    return _cluster(p) == 1 and _split(p) == 1 and not _streamk(p)


def _plain(p: dict) -> bool:
    # whole tiles through TMA, no staged copies
    return _whole_tiles(p) and not _staged(p)


def _streamk(p: dict) -> int:
    # the most CTAs a stream-K tile is split over; 0: whole tiles only (or cluster split-K)
    return p.get("streamk", 0)


def name(p: dict) -> str:
    base = f"wgmma_{p['bm']}x{p['bn']}x{BK}_c{p['consumers']}_s{p['stages']}_g{p['group_m']}"
    if _cluster(p) > 1:
        base += f"_cl{_cluster(p)}" + ("a" if _multicast(p) == "A" else "")
    if _split(p) > 1:
        base += f"_sk{_split(p)}"
    if _streamk(p):
        base += f"_stk{_streamk(p)}"
    if _ctas_per_sm(p) > 1:
        base += f"_x{_ctas_per_sm(p)}"
    if _epilogue_smem(p):
        base += "_es"
    if _epilogue_last(p):
        base += "_el"
    if _epilogue_bulk(p):
        base += "_ebt" if _tensor_stores(p) else "_eb"
    if _staged(p):
        ops = _staged_ops(p)
        return base + "_staged" + ("" if ops == "AB" else ops)
    return base


def applicable(p: dict, problem) -> bool:
    """TMA-legal row pitches for the TMA loader (the staged loader: the others), and problems big enough
    for a persistent 1-CTA/SM tensor-core kernel. The pitches: A's rows are K long, B's are N long for
    NN and K long for TN (C is stored without TMA, so an odd N is fine for TN)."""
    # the operands whose rows TMA refuses (not a multiple of 16 bytes). The staged loader serves exactly
    # those shapes; a one-operand staged kernel only those where the other operand is legal.
    refused = "".join(op for op in "AB" if operand_shape(op, problem)[2] % 8)
    if _staged(p):
        if not refused or _staged_ops(p) not in ("AB", refused):
            return False
    elif refused:
        return False
    if _tensor_stores(p) and problem.N % 8:   # the C tensor map's rows
        return False
    # A 64-row tile serves any M (TMA zero-fills the rows past it, which cost no DRAM reads): the skinny
    # problems, bound by streaming B, where the ring keeps a whole SM's loads in flight.
    if min(problem.N, problem.K) < 64 or (problem.M < 64 and p["bm"] != 64):
        return False
    tiles = -(-problem.M // p["bm"]) * -(-problem.N // p["bn"]) * problem.batch
    # Split-K where the tiles leave a quarter of the SMs idle and K holds 4 k tiles a share. The kernel's
    # shares are ceil(k tiles / split) long and the last gets what is left, which may be little or
    # nothing (k_share; 34 k tiles in 8: six of 5, one of 4, one empty); such splits still won shapes of
    # the sample tune.
    if _split(p) > 1 and (tiles > 3 * NUM_SMS // 4 or -(-problem.K // BK) < 4 * _split(p)):
        return False
    # Stream-K where the last round (or a grid of fewer tiles than SMs) leaves at least two SMs a tile
    # idle and K holds two k-tile shares of STREAMK_MIN_UNITS: elsewhere it splits nothing and runs as
    # the whole-tile kernel does. Few large tiles are fine here: their K is what is shared out.
    if _streamk(p):
        rest = tiles % NUM_SMS
        return rest != 0 and NUM_SMS // rest >= 2 and -(-problem.K // BK) >= 2 * STREAMK_MIN_UNITS
    # Two CTAs an SM where the tiles outnumber the SMs: on fewer the grid is the one-CTA kernel's.
    if _ctas_per_sm(p) > 1 and tiles <= NUM_SMS:
        return False
    # Large tiles on problems with fewer CTAs than half the SMs leave most of the GPU idle.
    return p["bm"] * p["bn"] <= 128 * 128 or tiles * _split(p) >= NUM_SMS // 2


def _threads(p: dict) -> int:
    return 128 * (1 + p["consumers"])   # one producer warpgroup, the consumers


def spec_text(p: dict) -> str:
    ops = _staged_ops(p)
    staged = {op: ", staged=1" if op in ops else "" for op in "AB"}
    # staged: the padded copies (1024-byte aligned, as hgemm.params.staged_operands lays them out; B's
    # rows are K x N for NN and N x K for TN, so the larger of the two), then the grid barrier's counter.
    # STAGED_PITCH is the kernel's staged_pitch() (hgemm/staged_loader.cuh); tests check they agree.
    copies = {"A": f"round_up(batch * M * round_up(K, {STAGED_PITCH}) * 2, 1024)",
              "B": f"round_up(batch * max(K * round_up(N, {STAGED_PITCH}), N * round_up(K, {STAGED_PITCH})) * 2, 1024)"}
    workspace = " + ".join([copies[op] for op in ops] + ["1024"]) if ops else "0"
    if _streamk(p):  # a CTA's slot of fp32 partial sums, then its consumers' flags (hgemm/streamk.cuh)
        slots = f"num_sms * {p['bm'] * p['bn'] * 4 + 8}"
        workspace = f"{workspace} + {slots}" if ops else slots
    return "\n".join([
        "/*@launch",
        f"entry: {name(p)}",
        f"block: {_threads(p)}",
        _grid(p),
        f"smem: {_smem_bytes(p)}",
        f"workspace: {workspace}",
        # the last CTA past the grid barrier resets its counters (hgemm/staged_loader.cuh); a stream-K
        # tile's owner clears the slots and flags it read
        *(["workspace_zero: kept"] if ops or _streamk(p) else []),
        "layouts: NN, TN",
        # sharing A, each CTA of the cluster loads (and multicasts) its share of the tile's rows
        f"tensor_map: A, box=({p['bm'] // (_cluster(p) if _multicast(p) == 'A' else 1)}, {BK}), swizzle=128{staged['A']}",
        f"tensor_map: B, box=(64, 64), swizzle=128{staged['B']}",
        # the tensor stores of C: one 16-row x 64-column box of a warp's parked rows a store
        *(["tensor_map: C, box=(16, 64), swizzle=128"] if _tensor_stores(p) else []),
        "@*/",
    ])


def _grid(p: dict) -> str:
    cl = _cluster(p)
    sk = _split(p)
    if _streamk(p):  # every SM: the split tiles' k tiles are shared out over all of them
        return "grid: num_sms"
    if sk > 1 and _staged(p):  # as many whole clusters as run at once, tiles or not: every CTA copies
        return f"grid: {sk} * ({staged_split_clusters(sk)})"
    if sk > 1:  # whole clusters of split_k CTAs, one a tile
        return f"grid: {sk} * min(num_sms // {sk}, cdiv(M, {p['bm']}) * cdiv(N, {p['bn']}) * batch)"
    if _staged(p):  # every SM copies, whatever the number of tiles (CTAs without a tile only copy)
        return "grid: num_sms" if cl == 1 else f"grid: num_sms // {cl} * {cl}"
    if cl == 1:
        sms = "num_sms" if _ctas_per_sm(p) == 1 else f"{_ctas_per_sm(p)} * num_sms"
        return f"grid: min({sms}, cdiv(M, {p['bm']}) * cdiv(N, {p['bn']}) * batch)"
    # whole clusters, one a group of `cl` tile rows (the last may stick out past M), or of `cl` tile
    # columns where they share A (the last may stick out past N)
    if _multicast(p) == "A":
        return f"grid: {cl} * min(num_sms // {cl}, cdiv(M, {p['bm']}) * cdiv(cdiv(N, {p['bn']}), {cl}) * batch)"
    return f"grid: {cl} * min(num_sms // {cl}, cdiv(cdiv(M, {p['bm']}), {cl}) * cdiv(N, {p['bn']}) * batch)"


def template_args(p: dict) -> str:
    """The wgmma_gemm template arguments of a variant: BM, BN, CONSUMERS, STAGES, GROUP_M, CLUSTER,
    EPILOGUE, LOADER, then SPLITK where it splits, SPLITK, STREAMK for stream-K, SPLITK, STREAMK,
    CTAS_PER_SM for two CTAs an SM and SPLITK, STREAMK, CTAS_PER_SM, MULTICAST for clusters sharing A
    (the layout comes from -DHGEMM_LAYOUT_TN)."""
    epilogue = {"smem": "Epilogue::smem", "last": "Epilogue::last_parked", "bulk": "Epilogue::bulk",
                "bulk_tensor": "Epilogue::bulk_tensor"}.get(
        p.get("epilogue"), "Epilogue::registers")
    loader = f"Loader::staged_{_staged_ops(p).lower()}" if _staged(p) else "Loader::tma"
    split = f", {_split(p)}" if _split(p) > 1 else ""
    if _streamk(p):
        split = f", 1, {_streamk(p)}"
    if _ctas_per_sm(p) > 1:
        split = f", 1, 0, {_ctas_per_sm(p)}"
    if _cluster(p) > 1 and _multicast(p) == "A":
        split = ", 1, 0, 1, Multicast::a"
    return (f"{p['bm']}, {p['bn']}, {p['consumers']}, {p['stages']}, {p['group_m']}, {_cluster(p)}, "
            f"{epilogue}, {loader}{split}")


def render(p: dict) -> str:
    ctas = _cluster(p) * _split(p)
    c_param, c_arg = (", const __grid_constant__ CUtensorMap tmap_c", ", &tmap_c") if _tensor_stores(p) else ("", "")
    cluster = f"__cluster_dims__({ctas}, 1, 1) " if ctas > 1 else ""
    return f"""#include <hgemm/wgmma_gemm.cuh>

{spec_text(p)}

extern "C" __global__ {cluster}void __launch_bounds__({_threads(p)}, {_ctas_per_sm(p)})
{name(p)}(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
    int M, int N, int K, int batch, void* workspace,
    const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b{c_param}) {{
  using namespace hgemm::sm90;
  wgmma_gemm<{template_args(p)}>({{A, B, C, M, N, K, batch, workspace, &tmap_a, &tmap_b{c_arg}}});
}}
"""

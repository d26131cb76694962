"""The dispatch cost model (hgemm.cost): its terms, its fit, its correction by measurements, and the
library's `cost` dispatch on the committed tunes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import ROOT
from hgemm.cost import FEATURES, CostModel, applicable, family, features, kernel_params, misaligned_rows
from hgemm.problem import Problem

# seed-family kernels of the committed library, by name
WG_NAME, WG_SPLIT_NAME = "wgmma_128x64x64_c1_s6_g8_es", "wgmma_128x64x64_c1_s6_g8_sk8"
MMA_NAME, MMA_SPLIT_NAME = "mma_sync_64x64x32_w2x2_s4_g8_sk1_mp", "mma_sync_64x64x32_w2x2_s4_g8_sk4_mp"
NARROW_NAME, SKINNY_NAME = "mma_sync_16x128x64_w1x4_s3_g8_sk1_mp", "skinny_tn_m1_npw2_sk1"
WG, WG_SPLIT, MMA = kernel_params(WG_NAME), kernel_params(WG_SPLIT_NAME), kernel_params(MMA_NAME)


def test_split_k_shortens_the_busiest_sms_work_where_the_tiles_leave_sms_idle():
    # 128 x 512 x 7616: 8 output tiles of 128 x 64 on 132 SMs. Unsplit, 8 SMs each run all of K (one
    # wave); split 8 ways, 64 CTAs in one wave each run an eighth (rounded up to 64-wide k steps)
    p = Problem(128, 512, 7616)
    one, eight = features(WG, p), features(WG_SPLIT, p)
    work, steps = FEATURES.index("tile_work"), FEATURES.index("latency")
    assert one[work] == 128 * 64 * 7616 and eight[work] == 128 * 64 * 960
    assert one[steps] == 7616 / 64 and eight[steps] == 960 / 64
    # past one wave the split buys nothing: 4096^2 has 2048 tiles of 128 x 64 already
    big = Problem(4096, 4096, 4096)
    assert features(WG, big)[work] == math.ceil(2048 / 132) * 128 * 64 * 4096


def test_a_narrow_warp_tile_reads_more_shared_memory_for_the_same_work():
    p = Problem(4096, 4096, 4096)
    square = features(MMA, p)                                   # 32 x 32 a warp
    narrow = features(kernel_params(NARROW_NAME), p)            # 16 x 32 a warp
    reads, work = FEATURES.index("smem_reads"), FEATURES.index("tile_work")
    assert narrow[reads] / narrow[work] > square[reads] / square[work]


def test_a_narrow_kernel_chains_fewer_loads_with_more_lanes_and_warps_a_row():
    # 64 x 3 x 4687: one CTA of 8 warps a row when they share k (kw 8), 8 rows a CTA otherwise; every
    # CTA stages all of B. B comes in chunks of 2048 k (2048, 2048, 591), each a wait for its staging
    # and one a batch of 16 loads a lane (a batch spans 16 x 32 k with one warp a row, the whole
    # chunk's 8 x 256 with eight)
    p = Problem(64, 3, 4687)
    one = kernel_params("narrow_nb4_l32_r1_w1")
    shared = kernel_params("narrow_nb4_l32_r1_w8")
    assert family(one) == "narrow"
    chain, l2 = FEATURES.index("latency"), FEATURES.index("l2_bytes")
    assert features(one, p)[chain] == (1 + 4) + (1 + 4) + (1 + 2) and features(shared, p)[chain] == 2 + 2 + 2
    assert features(one, p)[l2] == 2 * 8 * 3 * 4687 and features(shared, p)[l2] == 2 * 64 * 3 * 4687


def test_a_short_k_kernel_fills_one_wave_and_walks_the_rest_of_the_rows_in_sequence():
    # 4089 x 9017 x 3, KMAX 4, 8 columns a lane, 4 CTAs an SM: 36 blocks of 256 columns; 528 // 36 = 14
    # CTAs a column block share the rows (one wave of 504, none left over), 8 * 14 rows apart: 37 row
    # steps a warp. Each column block reads all of A, each CTA its columns of B.
    from kernels_corpus.families import small_k

    p = Problem(4089, 9017, 3)
    params = kernel_params("small_k_k4_v8_u1")
    assert family(params) == "small_k" and small_k.min_blocks(params) == 4
    assert small_k.column_blocks(params, p.N) == 36 and small_k.row_ctas(params, p) == 14
    chain, l2 = FEATURES.index("latency"), FEATURES.index("l2_bytes")
    x = features(params, p)
    assert x[chain] == 1 * 37
    assert x[l2] == 2 * 3 * (4089 * 36 + 9017 * 14)
    # two rows a step (still 4 CTAs an SM): the same 37 rows a warp in 19 steps
    two = kernel_params("small_k_k4_v8_u2")
    assert small_k.min_blocks(two) == 4 and small_k.row_ctas(two, p) == 14 and features(two, p)[chain] == 19


def test_a_skinny_tensor_core_kernel_counts_its_rounds_of_loads_and_reads_a_once_a_column_block():
    # 16 x 4096 x 14336, 32 columns a CTA, 8 warps in clusters of 2: 128 column blocks x 2 = 256 CTAs,
    # 2 an SM (one wave on 132 SMs); 224 chunks of 64 k over 16 warps: 14 a warp, 7 rounds of 2
    from kernels_corpus.families import skinny_mma

    p = Problem(16, 4096, 14336)
    params = kernel_params("skinny_mma_w8_t4_u1_s2")
    assert family(params) == "skinny_mma" and skinny_mma.min_blocks(params) == 2
    chain, l2 = FEATURES.index("latency"), FEATURES.index("l2_bytes")
    x = features(params, p)
    assert skinny_mma.ctas(params, p) == 256 and x[chain] == 14
    assert x[l2] == 2 * 16 * 14336 * 128
    two = kernel_params("skinny_mma_w8_t4_u2_s2")   # one CTA an SM: two waves of 7 rounds
    assert skinny_mma.min_blocks(two) == 1 and features(two, p)[chain] == 2 * 7
    # the cluster's reduction: each of the 256 CTAs' 16 x 32 fp32 partial sums; none without a split
    split = FEATURES.index("split_bytes")
    assert x[split] == 256 * 16 * 32 * 4 and features(kernel_params("skinny_mma_w8_t4_u1_s1"), p)[split] == 0


def test_a_swapped_skinny_tensor_core_kernel_streams_a_and_reads_b_once_a_block_of_a_rows():
    # 14336 x 16 x 4096 (N <= 16), the roles exchanged: 448 blocks of 32 of A's rows x 2 = 896 CTAs, 2 an
    # SM: 4 waves on 132 SMs; 64 chunks of 64 k over 16 warps: 4 a warp, in 4 rounds of 1. Every block
    # reads all of B's 16 columns.
    from hgemm.cost import applicable
    from kernels_corpus.families import skinny_mma

    p = Problem(14336, 16, 4096)
    params = kernel_params("skinny_mma_w8_t4_u1_s2_swap")
    assert family(params) == "skinny_mma" and skinny_mma.roles(params, p) == (16, 14336)
    assert applicable("skinny_mma_w8_t4_u1_s2_swap", p) and not applicable("skinny_mma_w8_t4_u1_s2", p)
    chain, l2 = FEATURES.index("latency"), FEATURES.index("l2_bytes")
    x = features(params, p)
    assert skinny_mma.ctas(params, p) == 896 and x[chain] == 4 * 4
    assert x[l2] == 2 * 16 * 4096 * 448


def test_a_skinny_tensor_core_kernel_streams_the_wide_operand_once_a_16_row_chunk():
    # 64 x 743 x 491 TN: four 16-row chunks on grid.z, each reading all of B's 743 x 491; at 65 rows the
    # family no longer applies (the tiles' families take it)
    from hgemm.cost import applicable
    from kernels_corpus.families import skinny_mma

    name = "skinny_mma_w8_t4_u1_s1_pair"
    params, dram = kernel_params(name), FEATURES.index("dram_bytes")
    once = 2 * (64 * 491 + 491 * 743 + 64 * 743)
    p = Problem(64, 743, 491, 1, "TN")
    assert applicable(name, p) and skinny_mma.ctas(params, p) == 4 * 24
    assert features(params, p)[dram] == once + 3 * 2 * 743 * 491
    assert features(params, Problem(16, 743, 491, 1, "TN"))[dram] == 2 * (16 * 491 + 491 * 743 + 16 * 743)
    assert not applicable(name, Problem(65, 743, 491, 1, "TN"))
    assert not applicable(name, Problem(743, 64, 491, 1, "TN"))  # 64 rows in N's role: the swap variant's
    assert applicable("skinny_mma_w8_t4_u1_s1_swap_pair", Problem(743, 64, 491, 1, "TN"))
    # two atoms a CTA: two 32-row chunks, the wide operand streamed twice; from 33 rows up
    two = kernel_params("skinny_mma_w8_t4_u1_s1_r2_pair")
    assert skinny_mma.row_chunks(two, p) == 2 and features(two, p)[dram] == once + 2 * 743 * 491
    assert applicable("skinny_mma_w4_t4_u1_s1_r2", Problem(17, 743, 496)) and not applicable(
        "skinny_mma_w4_t4_u1_s1_r4", Problem(32, 743, 496))


def test_a_skinny_tensor_core_kernel_with_element_loads_pays_for_each_element_on_unaligned_rows():
    # 64 x 743 x 491 TN (odd K): the elem variant reads A's 64 rows once a column block (24 of 32
    # columns) and B's 743 rows once a 16-row chunk (4), every element a 2-byte load; its pair twin and
    # either of them on aligned rows (K = 496) read vectors
    elems = FEATURES.index("misaligned_loads")
    p = Problem(64, 743, 491, 1, "TN")
    elem = kernel_params("skinny_mma_w8_t4_u1_s1")
    assert features(elem, p)[elems] == 491 * (743 * 4 + 64 * 24)
    assert features(kernel_params("skinny_mma_w8_t4_u1_s1_pair"), p)[elems] == 0
    assert features(elem, Problem(64, 743, 496, 1, "TN"))[elems] == 0
    # NN without swap reads B's rows along N: an odd N misaligns them whatever K
    assert features(elem, Problem(16, 743, 496))[elems] == 496 * (743 + 16 * 24)


def test_a_tensor_core_short_k_kernel_walks_its_rows_in_16_row_groups():
    # 1419 x 14848 x 64, KMAX 64, one CTA an SM: 233 blocks of 64 columns (N + 8 over 64) fill 132 SMs
    # less than twice, so one row CTA a block; its 8 warps take 16 rows a group: 1419 rows in 12 groups
    # of 128, 6 steps of 2, 2 waves. Every column block reads all of A, every CTA its columns of B.
    from kernels_corpus.families import small_k_mma

    p = Problem(1419, 14848, 64)
    params = kernel_params("small_k_mma_k64_u2")
    assert family(params) == "small_k_mma" and small_k_mma.min_blocks(params) == 1
    assert small_k_mma.column_blocks(params, p.N) == 233 and small_k_mma.row_ctas(params, p) == 1
    chain, l2 = FEATURES.index("latency"), FEATURES.index("l2_bytes")
    x = features(params, p)
    assert small_k_mma.steps(params, p) == 6 and x[chain] == 2 * 6
    assert x[l2] == 2 * 64 * (1419 * 233 + 14848 * 1)


def test_a_tile_kernel_stores_its_busiest_sms_tiles_in_sequence_with_their_mainloops():
    # 1419 x 14848 x 64 on 256 x 128 tiles: 6 x 116 = 696 tiles, 6 waves on 132 SMs, each SM storing
    # 6 tiles of 256 x 128 after one k step each; 128 x 64 tiles: 12 x 232 = 2784, 22 waves of 128 x 64.
    # The kernels that stream C (short-K) and the skinny ones have no such term.
    p, epilogue = Problem(1419, 14848, 64), FEATURES.index("epilogue")
    assert features(kernel_params("wgmma_256x128x64_c2_s3_g8_es"), p)[epilogue] == 6 * 256 * 128
    assert features(WG, p)[epilogue] == 22 * 128 * 64
    # two CTAs of 64 x 64 share an SM: 23 x 232 = 5336 tiles in 21 waves of 264
    assert features(MMA, p)[epilogue] == 21 * 2 * 64 * 64
    assert features(kernel_params("small_k_mma_k64_u2"), p)[epilogue] == 0


def test_two_ctas_an_sm_run_the_same_work_as_two_chains_of_half_the_k_steps():
    # b16 512^3 in 64 x 64 tiles: 1024 tiles. One CTA an SM: 8 waves of 132, each SM 8 tiles of 8 k
    # steps in sequence. Two: 4 waves of 264, each SM the same 8 tiles, as two chains of 4 tiles.
    p = Problem(512, 512, 512, 16)
    one = features(kernel_params("wgmma_64x64x64_c1_s6_g8_es"), p)
    two = features(kernel_params("wgmma_64x64x64_c1_s6_g8_x2_es"), p)
    for term in ("tile_work", "smem_reads", "epilogue", "dram_bytes", "l2_bytes"):
        assert two[FEATURES.index(term)] == one[FEATURES.index(term)], term
    steps = FEATURES.index("latency")
    assert one[steps] == 8 * 8 and two[steps] == 4 * 8


def test_only_a_staged_kernel_waits_at_a_grid_barrier():
    # 128 x 81 x 1745 NN: N = 81 halves is no 16-byte pitch, so TMA reads B from the staged copy; the
    # barrier's wait is one, whatever the bytes copied
    p, barrier = Problem(128, 81, 1745), FEATURES.index("grid_barrier")
    assert features(kernel_params("wgmma_128x64x64_c1_s6_g8_sk4_staged"), p)[barrier] == 1.0
    assert features(kernel_params("wgmma_128x64x64_c1_s6_g8_sk4_staged"), Problem(4096, 4095, 4096))[barrier] == 1.0
    assert features(WG_SPLIT, p)[barrier] == 0.0 and features(MMA, p)[barrier] == 0.0


def test_with_the_short_k_tune_the_cost_rule_streams_c_on_wide_short_k_shapes(tmp_path):
    """On the committed tunes with the short-K tensor-core family's, the two wide K = 64 shapes of the
    held-out sample split (no tune saw them; the family won the tune's wide K = 64 shapes) go to that
    family under the cost rule."""
    from hgemm.library import Library, merge_libraries

    tunes = [ROOT / "benchmarks" / t for t in ("tune", "sample_tune", "small_k_mma/tune")]
    merge_libraries(tunes, tmp_path, dispatch="cost")
    lib = Library(tmp_path)
    for p in (Problem(1419, 14848, 64), Problem(3657, 15505, 64)):
        assert family(kernel_params(lib.lookup(p).name)) == "small_k_mma", p.key


def test_two_column_blocks_of_a_narrow_kernel_read_the_walked_operand_twice():
    # 768 x 7 x 5312 with NB 4: two blocks of columns, twice the CTAs of NB 8, each block reading A
    p = Problem(768, 7, 5312)
    two = features(kernel_params("narrow_nb4_l32_r1_w1"), p)
    one = features(kernel_params("narrow_nb8_l32_r1_w1"), p)
    dram, l2 = FEATURES.index("dram_bytes"), FEATURES.index("l2_bytes")
    assert two[dram] - one[dram] == 2 * 768 * 5312
    assert two[l2] == 2 * (96 * 2) * 4 * 5312 and one[l2] == 2 * 96 * 7 * 5312


def test_a_cluster_reads_its_shared_operand_tile_from_l2_once_for_both_ctas():
    # 2048^3 in 256 x 128 tiles: 128 tiles of 32 k tiles; sharing A two CTAs pull 128 + 128 rows a k
    # step instead of 256 + 128, sharing B 256 + 64
    p = Problem(2048, 2048, 2048)
    plain = dict(bm=256, bn=128, consumers=2, stages=3, group_m=8, epilogue="smem")
    l2 = FEATURES.index("l2_bytes")
    assert features(plain, p)[l2] == 128 * (256 + 128) * 2048
    assert features(dict(plain, cluster=2, multicast="A"), p)[l2] == 128 * (128 + 128) * 2048
    assert features(dict(plain, cluster=2), p)[l2] == 128 * (256 + 64) * 2048


def _synthetic(coef: dict[str, list[float]], kernels: dict[str, dict], shapes: list[Problem]):
    return {p.key: {n: float(np.dot(coef[family(params)], features(params, p))) for n, params in kernels.items()}
            for p in shapes}


SHAPES = [Problem(m, n, k, batch=b) for m, n, k, b in [
    (128, 512, 7616, 1), (4096, 4096, 4096, 1), (1024, 1024, 1024, 1), (256, 8192, 2048, 1), (8192, 256, 512, 1),
    (64, 64, 8192, 1), (2048, 2048, 128, 4), (512, 512, 512, 8), (3000, 1000, 4000, 1), (192, 1216, 6336, 1),
    (16384, 1024, 1024, 1), (640, 640, 12288, 1), (2048, 1001, 2048, 1)]]


def test_the_fit_recovers_times_the_model_can_express():
    # times made by known non-negative coefficients: the fit must reproduce them and leave no residual
    truth = {"wgmma": [5.0, 2e-7, 0, 2.5e-7, 1e-8, 0, 0.1, 4e-7, 0, 3e-5, 0],
             "mma_sync": [3.5, 2e-7, 1.7e-6, 5e-7, 1e-7, 6e-6, 0, 0, 6e-5, 0, 0]}
    kernels = {name: kernel_params(name) for name in (WG_NAME, WG_SPLIT_NAME, MMA_NAME, MMA_SPLIT_NAME)}
    model = CostModel(_synthetic(truth, kernels, SHAPES))
    for p in SHAPES:
        for name, params in kernels.items():
            want = float(np.dot(truth[family(params)], features(params, p)))
            assert model.model_us(name, p) == pytest.approx(want, rel=1e-3)
    assert all(abs(r) < 1e-3 for ratios in model.ratios.values() for r in ratios.values())


def test_measurements_near_the_shape_move_the_estimate_and_far_ones_leave_the_mean():
    truth = {"wgmma": [5.0, 2e-7, 0, 2.5e-7, 0, 0, 0.1, 0, 0, 0, 0]}
    a, b = WG_NAME, WG_SPLIT_NAME
    measured = _synthetic(truth, {a: WG, b: WG_SPLIT}, SHAPES)
    slow_at = Problem(192, 1216, 6336).key
    measured[slow_at][b] *= 3  # b measured 3x its model on one shape
    model = CostModel(measured)
    probe = Problem(200, 1200, 6000)
    modelled = math.log(model.model_us(b, probe))
    alone = model.log_estimate(b, probe, near=[])                  # no neighbours: its mean ratio
    beside = model.log_estimate(b, probe, near=[(0.1, slow_at)])   # the slow shape is close
    assert alone == pytest.approx(modelled + model.mean[b])
    assert beside > alone + 0.3
    # a kernel with no measurement has no estimate, and one of no family neither
    assert model.log_estimate("wgmma_128x64x64_c1_s5_g8_es", probe, []) is None
    assert model.log_estimate("reference_mma_sync", probe, []) is None


def test_the_model_ranks_only_kernels_their_family_would_time_on_the_shape():
    # the skinny family is timed on a few rows only (here M <= 2): on a large square shape its memory-only terms
    # would promise a fraction of the tensor-core time, so it is not ranked there at all
    skinny_name, wg_name = SKINNY_NAME, WG_NAME
    big, thin = Problem(4096, 4096, 4096, layout="TN"), Problem(2, 4096, 4096, layout="TN")
    assert not applicable(skinny_name, big) and applicable(skinny_name, thin)
    measured = {thin.key: {skinny_name: 10.0}, big.key: {wg_name: 300.0},
                Problem(4096, 2048, 4096, layout="TN").key: {wg_name: 160.0}}
    model = CostModel(measured)
    assert model.log_estimate(skinny_name, big, []) < model.log_estimate(wg_name, big, [])
    assert model.pick([skinny_name, wg_name], big, []) == wg_name


def test_the_cost_dispatch_splits_k_where_few_tiles_hold_a_long_k(tmp_path):
    """On the committed tunes, 128 x 512 x 7616 (8 output tiles, in no tune) gets a split-K kernel
    under the cost rule; the measured rule takes its neighbours' unsplit winner."""
    from hgemm.library import Library, merge_libraries

    tunes = [ROOT / "benchmarks/tune", ROOT / "benchmarks/sample_tune"]
    merge_libraries(tunes, tmp_path / "cost", dispatch="cost")
    merge_libraries(tunes, tmp_path / "measured", dispatch="measured")
    p = Problem(128, 512, 7616)
    choice = Library(tmp_path / "cost").lookup(p)
    assert choice.how.startswith("cost ") and kernel_params(choice.name).get("split_k", 1) > 1
    assert kernel_params(Library(tmp_path / "measured").lookup(p).name).get("split_k", 1) == 1


def test_odd_pitches_send_the_mma_sync_operands_through_registers_and_leave_wgmma_alone():
    # 128 x 301 x 4723 TN: both operands' rows are K = 4723 halves, not 16-byte multiples
    odd, even = Problem(128, 301, 4723, layout="TN"), Problem(128, 304, 4728, layout="TN")
    loads = FEATURES.index("misaligned_loads")
    narrow = kernel_params("mma_sync_16x128x64_w1x4_s3_g8_sk4_mp")
    # 24 tiles x 4 splits in one wave of 3 CTAs an SM; a CTA's k share is 1216 (19 steps of 64)
    assert features(narrow, odd)[loads] == 3 * (16 + 128) * 1216
    assert features(narrow, even)[loads] == 0
    assert features(kernel_params("wgmma_128x64x64_c1_s6_g8_sk8_staged"), odd)[loads] == 0
    # NN with N = 301: only B's rows are odd; a 64 x 32 warp tile (64 accumulators a thread) has no
    # mixed path, so A goes through registers with it, where a 32 x 32 one keeps cp.async for A
    nn = Problem(1024, 301, 4096)
    assert misaligned_rows(MMA, nn) == (False, True)
    assert misaligned_rows(kernel_params("mma_sync_128x128x32_w2x4_s3_g8_sk1_mp"), nn) == (True, True)


HELD_OUT_RUNS = ("dispatch/rules_rl_heldout.json.gz", "dispatch/rules_sample_heldout.json.gz", "dispatch/misaligned_term.json",
                 "wgmma_64_rows/rl_heldout.json.gz", "wgmma_64_rows/sample_heldout_skinny.json.gz",
                 "wgmma_64_rows/sample_heldout_general.json.gz")


def test_on_held_out_shapes_the_model_ranks_the_clearly_faster_kernel_first(tmp_path):
    """The committed H200 runs that timed two libraries' kernels on shapes no tune saw: wherever both
    were timed and one took under 2/3 of the other's time, the model fitted to the committed tunes
    (corrected by the nearest tuned shapes, as the cost dispatch is) ranks the faster first. Most are
    small-M.N, long-K, odd-pitch shapes, where an mma.sync split-K kernel reads its operands through
    registers and the staged wgmma split-K kernel reads them from padded copies."""
    import gzip
    import json

    from hgemm.library import Library, merge_libraries

    merge_libraries([ROOT / "benchmarks/tune", ROOT / "benchmarks/sample_tune"], tmp_path, dispatch="cost")
    lib = Library(tmp_path)
    model = lib.cost_model()
    pairs = []
    for run in HELD_OUT_RUNS:
        raw = (ROOT / "benchmarks" / run).read_bytes()
        results = json.loads(gzip.decompress(raw) if run.endswith(".gz") else raw)
        for pr in results["problems"]:
            p = Problem.from_dict(pr["problem"])
            timed = sorted((r["time_us"], name.split(":", 1)[1]) for name, r in pr["candidates"].items()
                           if r.get("status") == "ok" and r.get("time_us"))
            if (len(timed) == 2 and timed[0][0] < timed[1][0] * 2 / 3
                    and all(applicable(n, p) and n in model.mean for _, n in timed)):
                pairs.append((p, timed[0][1], timed[1][1]))
    assert len(pairs) >= 10
    for p, fast, slow in pairs:
        near = lib.neighbours(p)
        assert model.log_estimate(fast, p, near) < model.log_estimate(slow, p, near), (p.key, fast, slow)


def test_the_estimate_tells_stream_k_from_its_twin_as_the_gpu_did():
    """hgemm.tune.estimate with the stream-K owner's serial tail (STREAMK_OWNER_WORK_PER_BYTE, fitted by
    benchmarks/streamk/fit_estimate.py to the committed H100 runs): which of a stream-K kernel and its
    whole-tile twin was faster, told right on at least 80% of the 144 timed pairs (83%; 53% without
    the tail), and the weight refitted from those runs still near the one in use."""
    from benchmarks.streamk.fit_estimate import fit, pairs
    from hgemm.tune import STREAMK_OWNER_WORK_PER_BYTE

    rows = pairs()
    assert len(rows) == 144
    told = sum((r["work"] + STREAMK_OWNER_WORK_PER_BYTE * r["tail"] < r["twin"]) == (r["ratio"] < 1) for r in rows)
    without = sum((r["work"] < r["twin"]) == (r["ratio"] < 1) for r in rows)
    assert told >= 0.8 * len(rows) and without < 0.6 * len(rows)
    assert 0.8 < fit(rows)[1] / STREAMK_OWNER_WORK_PER_BYTE < 1.25

"""GPU: tune a small library, then hgemm.matmul is correct on random shapes, 2-D and batched, NN and TN."""

from __future__ import annotations

import pytest

from hgemm.entry import EvalOptions
from hgemm.problem import Problem
from hgemm.tune import FALLBACK_NAME

pytestmark = pytest.mark.gpu


def test_matmul_matches_reference_on_random_shapes(tmp_path):
    import random

    import torch

    import hgemm
    from hgemm.tune import tune

    table = tune([Problem(1024, 1024, 1024), Problem(16, 4096, 4096), Problem(256, 256, 256, 16)], tmp_path,
                 EvalOptions(reps=2, baselines=("cublas",)), tiles_per_family=1, progress=False)
    assert table["entries"], table
    # the fallback and the reference kernels were timed on every shape, beside the winner
    assert table["fallback"] == FALLBACK_NAME
    for entry in table["entries"].values():
        assert set(entry["references"]) == {"reference_mma_sync", "reference_mma_pipelined", FALLBACK_NAME}, entry
        assert all(0 < s <= entry["speedup_vs_best"] for s in entry["references"].values()), entry
    rng = random.Random(0)
    for trial in range(12):
        M, N, K = rng.choice([1, 7, 64, 300]), rng.choice([1, 33, 256, 1000]), rng.choice([1, 17, 512, 4096])
        batched, tn = trial % 3 == 0, trial % 2 == 1
        shape_a = (3, M, K) if batched else (M, K)
        a = torch.randn(shape_a, device="cuda", dtype=torch.float16)
        if tn:
            w = torch.randn((3, N, K) if batched else (N, K), device="cuda", dtype=torch.float16)
            b = w.transpose(-1, -2)
        else:
            b = torch.randn((3, K, N) if batched else (K, N), device="cuda", dtype=torch.float16)
        c = hgemm.matmul(a, b, library=tmp_path)
        ref = torch.matmul(a.double(), b.double())
        err = (c.double() - ref).abs().max().item()
        assert err <= 2**-9 * ref.abs().max().item() + 1e-2, (M, N, K, batched, tn, err)

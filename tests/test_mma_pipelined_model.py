"""A numpy model of kernels_corpus/reference/mma_pipelined.cu: its stage loader, ldmatrix addressing and
fragment use, under the PTX ISA's ldmatrix and mma.m16n8k16 register layouts. It checks the kernel's
index arithmetic (copied below from the .cu) on CPU; the GPU test (test_gpu_harness) checks the rest."""

from __future__ import annotations

import numpy as np
import pytest

BK, STAGE = 32, 10240


def ldmatrix(smem: np.ndarray, addrs: list[int], trans: bool) -> np.ndarray:
    """x4: lane l gives the row address of matrix l // 8, row l % 8. Returns [lane][matrix][2] halves:
    element (l // 4, 2 (l % 4) + e) of each matrix, or (2 (l % 4) + e, l // 4) with .trans."""
    mats = np.array([[smem[addrs[8 * q + r]: addrs[8 * q + r] + 8] for r in range(8)] for q in range(4)])
    out = np.zeros((32, 4, 2), dtype=smem.dtype)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for q in range(4):
            for e in range(2):
                out[lane, q, e] = mats[q, 2 * t + e, g] if trans else mats[q, g, 2 * t + e]
    return out


def mma(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """m16n8k16 row.col: a[lane][4][2], b[lane][2][2], acc[lane][4] (PTX ISA fragment layouts)."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for e in range(2):
            A[g, 2 * t + e], A[g + 8, 2 * t + e] = a[lane, 0, e], a[lane, 1, e]
            A[g, 2 * t + 8 + e], A[g + 8, 2 * t + 8 + e] = a[lane, 2, e], a[lane, 3, e]
            B[2 * t + e, g], B[2 * t + 8 + e, g] = b[lane, 0, e], b[lane, 1, e]
    D = A @ B
    for lane in range(32):
        g, t = lane // 4, lane % 4
        acc[lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]


def load_stage(s, A, B, M, N, K, m0, n0, k0, tn):
    """The kernel's load_stage, through load8's zero-filling element path (the 16-byte path copies the
    same chunks)."""
    AP, BP = 40, (40 if tn else 136)

    def load8(off, X, row, ok, c, length):
        for e in range(8):
            s[off + e] = X.flat[row * length + c + e] if ok and c + e < length else 0.0

    for tid in range(256):
        for i in range(tid, 512, 256):
            r, c = i >> 2, (i & 3) * 8
            load8(r * AP + c, A, m0 + r, m0 + r < M, k0 + c, K)
            if tn:
                load8(128 * AP + r * BP + c, B, n0 + r, n0 + r < N, k0 + c, K)
            else:
                rb, cb = i >> 4, (i & 15) * 8
                load8(128 * AP + rb * BP + cb, B, k0 + rb, k0 + rb < K, n0 + cb, N)


@pytest.mark.parametrize("tn", [False, True])
def test_mma_pipelined_tile_matches_numpy(tn):
    # one 128x128 output tile at the ragged corner of a 150 x 140 x 40 problem: edges in M, N and K
    rng = np.random.default_rng(0)
    M, N, K = 150, 140, 40
    A = rng.standard_normal((M, K)).astype(np.float32)
    Bmath = rng.standard_normal((K, N)).astype(np.float32)
    B = np.ascontiguousarray(Bmath.T) if tn else Bmath
    m0, n0 = 128, 128
    AP, BP = 40, (40 if tn else 136)
    out = np.zeros((M, N), dtype=np.float32)
    acc = np.zeros((8, 4, 4, 32, 4))  # [warp][i][j][lane][4]
    for t in range((K + BK - 1) // BK):
        s = np.zeros(STAGE, dtype=np.float32)
        load_stage(s, A, B, M, N, K, m0, n0, t * BK, tn)
        sa, sb = s[: 128 * AP], s[128 * AP:]
        for warp in range(8):
            tid0 = warp * 32
            wm, wn = (tid0 >> 7) * 64, (tid0 >> 5 & 3) * 32
            for kk in (0, 16):
                a = [ldmatrix(sa, [(wm + i * 16 + (lane & 15)) * AP + kk + (lane >> 4) * 8 for lane in range(32)],
                              False) for i in range(4)]
                b = [None] * 4
                for j in (0, 2):
                    addrs = []
                    for lane in range(32):
                        q = lane >> 3
                        n, k = wn + j * 8 + (q >> 1) * 8, kk + (q & 1) * 8
                        addrs.append((n + (lane & 7)) * BP + k if tn else (k + (lane & 7)) * BP + n)
                    r = ldmatrix(sb, addrs, trans=not tn)
                    b[j], b[j + 1] = r[:, 0:2], r[:, 2:4]
                for i in range(4):
                    for j in range(4):
                        mma(acc[warp, i, j], a[i], b[j])
    for warp in range(8):
        tid0 = warp * 32
        wm, wn = (tid0 >> 7) * 64, (tid0 >> 5 & 3) * 32
        for i in range(4):
            for j in range(4):
                for lane in range(32):
                    for h in range(2):
                        row = m0 + wm + i * 16 + (lane >> 2) + 8 * h
                        col = n0 + wn + j * 8 + (lane & 3) * 2
                        for e in range(2):
                            if row < M and col + e < N:
                                out[row, col + e] = acc[warp, i, j, lane, 2 * h + e]
    want = A[m0:] @ Bmath[:, n0:]
    np.testing.assert_allclose(out[m0:, n0:], want, rtol=1e-4, atol=1e-4)
    assert not out[:m0].any() and not out[:, :n0].any()  # only its own tile written

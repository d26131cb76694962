"""The kernel database: schema, round trip, best/top-k, nearby shapes, per-stage summaries, snapshots."""

from __future__ import annotations

import sqlite3

from hgemm.problem import Problem, TaskProblem
from training.kerneldb import KernelDB, shape_distance, text_sha


def ok(speedup, time_us=None, cublas=None):
    return {"status": "ok", "speedup_vs_best": speedup, "time_us": time_us or 100.0 / speedup,
            "speedup_vs_cublas": cublas or speedup}


def test_schema_is_exact_and_wal(tmp_path):
    KernelDB(tmp_path / "k.sqlite").close()
    conn = sqlite3.connect(tmp_path / "k.sqlite")
    cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("kernels", "evaluations")}
    assert cols["kernels"] == ["sha", "text"]
    assert cols["evaluations"] == ["id", "stage", "step", "problem_key", "shape_class", "sha", "status", "time_us",
                                   "speedup_vs_best", "speedup_vs_cublas", "reward", "error", "source", "created"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_round_trip_best_and_top_k(tmp_path):
    db = KernelDB(tmp_path / "k.sqlite")
    key = Problem(256, 256, 256).key
    sha = db.record("rl_hgemm", 3, key, "aligned", "kernel A", ok(1.5), 0.4, "policy")
    assert sha == text_sha("kernel A")
    db.record("rl_hgemm", 4, key, "aligned", "kernel A", ok(1.2), 0.2, "policy")  # re-measured slower
    db.record("rl_hgemm", 4, key, "aligned", "kernel B", ok(0.8), -0.2, "policy")
    db.record("rl_hgemm", 5, key, "aligned", "kernel C", {"status": "wrong", "error": "x" * 5000}, -2.5, "policy")
    db.record("rl_general", 1, "relu_f32_n1000", "task", "kernel A", {"status": "parse_error", "error": "e"}, -4, "policy")

    best = db.best(key)
    assert best["text"] == "kernel A" and best["speedup_vs_best"] == 1.2  # a kernel's lowest verified speedup
    assert [r["text"] for r in db.top_k(key, 5)] == ["kernel A", "kernel B"]  # distinct, verified only
    assert db.best("b1_m1_n1_k1_NN") is None
    assert db.status_counts("rl_hgemm") == {"ok": 3, "wrong": 1}
    assert db.status_counts() == {"ok": 3, "wrong": 1, "parse_error": 1}
    assert db.count("rl_general") == 1 and db.problem_keys("rl_general") == {"relu_f32_n1000"}
    assert list(db.best_per_key("rl_hgemm")) == [key] and db.best_per_key("rl_general") == {}
    n_kernels = db._query("SELECT COUNT(*) AS n FROM kernels")[0]["n"]
    assert n_kernels == 3  # texts stored once
    assert len(db._query("SELECT error FROM evaluations WHERE status = 'wrong'")[0]["error"]) <= 2000

    db.copy_to(tmp_path / "snapshot.sqlite")
    db.close()
    again = KernelDB(tmp_path / "snapshot.sqlite")
    assert again.best(key)["text"] == "kernel A"
    again.close()


def test_nearby_prefers_close_shapes_same_layout_and_honours_exclude(tmp_path):
    db = KernelDB(tmp_path / "k.sqlite")
    shapes = {Problem(1024, 1024, 1024): 1.1, Problem(2048, 2048, 2048): 0.9, Problem(1024, 1024, 1024, 1, "TN"): 2.0,
              Problem(64, 64, 64, 16): 3.0, Problem(1000, 1000, 1000): 0.7}
    for p, s in shapes.items():
        db.record("rl_hgemm", 0, p.key, p.shape_class, f"k{p.key}", ok(s), 0.0, "policy")
    db.record("rl_general", 0, "relu_f32_n1000", "task", "task kernel", ok(1.0), 0.0, "policy")
    target = Problem(1024, 1024, 1024)
    near = db.nearby(target, 3)
    # distances: 0, 3 * log2(1024/1000), 2 (other layout); 2048^3 is 3 away
    assert [r["problem_key"] for r in near] == [target.key, Problem(1000, 1000, 1000).key,
                                                Problem(1024, 1024, 1024, 1, "TN").key]
    assert near[0]["distance"] == 0.0 and near[0]["text"] == f"k{target.key}"
    excluded = db.nearby(target, 2, exclude={target.key})
    assert target.key not in [r["problem_key"] for r in excluded]
    # the task kernel is never offered for a GEMM, and GEMM kernels never for a task
    assert all(r["problem_key"] != "relu_f32_n1000" for r in db.nearby(target, 10))
    assert [r["problem_key"] for r in db.nearby(TaskProblem.of("relu_f32", {"n": 65537}), 5)] == ["relu_f32_n1000"]
    db.close()


def test_shape_distance():
    p = Problem(1024, 1024, 1024)
    assert shape_distance(p, p.key) == 0.0
    assert shape_distance(p, "b1_m2048_n1024_k1024_NN") == 1.0
    assert shape_distance(p, "b1_m1024_n1024_k1024_TN") == 2.0
    assert shape_distance(p, "relu_f32_n1000") is None
    assert shape_distance(TaskProblem.of("softmax_rows_f32", {"rows": 3, "cols": 37}), "softmax_rows_f32_cols37_rows12") == 2.0

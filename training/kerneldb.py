"""The kernel database: every candidate the RL stages evaluated, with its verdict and reward.

Both RL stages write it, the contrastive prompts (training/context.py) read it (the best and some weaker
kernels for nearby shapes), and the report reads the finished file with read-only queries of its own
(hgemm.report.inputs), so the columns below are a file format. One SQLite file, two tables:

    kernels      sha -> text            (each distinct candidate text stored once)
    evaluations  one row per (candidate, problem) verdict: stage, step, status, time, speedups, reward

WAL mode, so readers (a report, a prompt builder) never block the one writer. Writes are serialised by
a lock because the reward function writes from an executor thread while the stage may read.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import threading
import time
from pathlib import Path

from hgemm.problem import Problem, TaskProblem

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kernels (sha TEXT PRIMARY KEY, text TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS evaluations (id INTEGER PRIMARY KEY, stage TEXT, step INTEGER, problem_key TEXT, "
    "shape_class TEXT, sha TEXT, status TEXT, time_us REAL, speedup_vs_best REAL, speedup_vs_cublas REAL, "
    "reward REAL, error TEXT, source TEXT, created REAL)",
    "CREATE INDEX IF NOT EXISTS evaluations_key ON evaluations (problem_key, status)",
    "CREATE INDEX IF NOT EXISTS evaluations_stage ON evaluations (stage)",
)

MAX_ERROR_CHARS = 2000  # compiler logs can be huge; the first lines say what went wrong


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


class KernelDB:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # check_same_thread=False: the reward runs in an executor thread; the lock keeps access serial.
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            for stmt in SCHEMA:
                self._conn.execute(stmt)
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def copy_to(self, path: str | Path) -> None:
        """A consistent snapshot of the database in one file (SQLite's online backup; WAL included)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        with self._lock:
            dst = sqlite3.connect(str(tmp))
            self._conn.backup(dst)
            dst.close()
        tmp.replace(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---------------------------------------------------------------------------------- writing
    def record(self, stage: str, step: int, problem_key: str, shape_class: str, text: str,
               verdict_result: dict, reward: float | None, source: str) -> str:
        """Store one verdict (a judge verdict, or one of its per-problem results); returns the text's sha."""
        return self.record_many([(stage, step, problem_key, shape_class, text, verdict_result, reward, source)])[0]

    def record_many(self, rows: list[tuple]) -> list[str]:
        """Several record() calls in one transaction (one commit per reward batch, not per kernel)."""
        shas, now = [], time.time()
        with self._lock:
            for stage, step, problem_key, shape_class, text, r, reward, source in rows:
                sha = text_sha(text)
                shas.append(sha)
                self._conn.execute("INSERT OR IGNORE INTO kernels (sha, text) VALUES (?, ?)", (sha, text))
                self._conn.execute(
                    "INSERT INTO evaluations (stage, step, problem_key, shape_class, sha, status, time_us, "
                    "speedup_vs_best, speedup_vs_cublas, reward, error, source, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (stage, int(step), problem_key, shape_class, sha, r.get("status"), _finite(r.get("time_us")),
                     _finite(r.get("speedup_vs_best")), _finite(r.get("speedup_vs_cublas")), _finite(reward),
                     (r.get("error") or "")[:MAX_ERROR_CHARS], source, now),
                )
            self._conn.commit()
        return shas

    # ---------------------------------------------------------------------------------- reading
    def _query(self, sql: str, args: tuple = ()) -> list[dict]:
        with self._lock:
            return [dict(row) for row in self._conn.execute(sql, args).fetchall()]

    def top_k(self, problem_key: str, k: int) -> list[dict]:
        """The k fastest distinct verified kernels for one problem, best first. A kernel's speedup is its
        lowest verified measurement, so one lucky timing does not put it on top."""
        return self._query(
            "SELECT e.problem_key, e.sha, k.text, MIN(e.speedup_vs_best) AS speedup_vs_best, "
            "MAX(e.time_us) AS time_us, MIN(e.speedup_vs_cublas) AS speedup_vs_cublas "
            "FROM evaluations e JOIN kernels k ON k.sha = e.sha "
            "WHERE e.problem_key = ? AND e.status = 'ok' AND e.speedup_vs_best IS NOT NULL "
            "GROUP BY e.sha ORDER BY speedup_vs_best DESC, e.sha LIMIT ?",
            (problem_key, int(k)),
        )

    def best(self, problem_key: str) -> dict | None:
        """The fastest verified kernel for one problem (problem_key, sha, text, speedups, time), or None."""
        rows = self.top_k(problem_key, 1)
        return rows[0] if rows else None

    def verified_keys(self) -> dict[str, float]:
        """problem_key -> best verified speedup, for every problem with a verified kernel."""
        rows = self._query(
            "SELECT problem_key, MAX(speedup_vs_best) AS s FROM evaluations "
            "WHERE status = 'ok' AND speedup_vs_best IS NOT NULL GROUP BY problem_key"
        )
        return {r["problem_key"]: r["s"] for r in rows}

    def nearby(self, problem: Problem | TaskProblem, k: int, exclude: set[str] | frozenset = frozenset()) -> list[dict]:
        """The best verified kernel of each of the k nearest problems (the problem itself included, at
        distance 0), nearest first; each row adds its `distance`. Keys in `exclude` (held-out shapes)
        are never returned."""
        scored = []
        for key in self.verified_keys():
            if key in exclude:
                continue
            d = shape_distance(problem, key)
            if d is not None:
                scored.append((d, key))
        out = []
        for d, key in sorted(scored)[:k]:
            row = self.best(key)
            if row:
                out.append(row | {"distance": d})
        return out

    def evaluations(self, stage: str | None = None) -> list[dict]:
        """Every evaluation (of this stage) in order: step, problem_key, status, speedup_vs_best."""
        where, args = ("WHERE stage = ?", (stage,)) if stage else ("", ())
        return self._query(f"SELECT step, problem_key, status, speedup_vs_best FROM evaluations {where} ORDER BY id", args)

    def status_counts(self, stage: str | None = None) -> dict[str, int]:
        where, args = ("WHERE stage = ?", (stage,)) if stage else ("", ())
        rows = self._query(f"SELECT status, COUNT(*) AS n FROM evaluations {where} GROUP BY status", args)
        return {r["status"]: r["n"] for r in rows}

    def best_per_key(self, stage: str | None = None) -> dict[str, dict]:
        """problem_key -> its best verified kernel (sha, text, speedups, time, shape_class)."""
        where, args = ("AND e.stage = ?", (stage,)) if stage else ("", ())
        rows = self._query(
            "SELECT e.problem_key, e.shape_class, e.sha, k.text, MIN(e.speedup_vs_best) AS speedup_vs_best, "
            "MAX(e.time_us) AS time_us, MIN(e.speedup_vs_cublas) AS speedup_vs_cublas "
            "FROM evaluations e JOIN kernels k ON k.sha = e.sha "
            f"WHERE e.status = 'ok' AND e.speedup_vs_best IS NOT NULL {where} "
            "GROUP BY e.problem_key, e.sha",
            args,
        )
        best: dict[str, dict] = {}
        for r in rows:
            if r["problem_key"] not in best or r["speedup_vs_best"] > best[r["problem_key"]]["speedup_vs_best"]:
                best[r["problem_key"]] = r
        return dict(sorted(best.items()))

    def problem_keys(self, stage: str | None = None) -> set[str]:
        """Every problem key with at least one evaluation (of this stage)."""
        where, args = ("WHERE stage = ?", (stage,)) if stage else ("", ())
        return {r["problem_key"] for r in self._query(f"SELECT DISTINCT problem_key FROM evaluations {where}", args)}

    def count(self, stage: str | None = None) -> int:
        return sum(self.status_counts(stage).values())


def shape_distance(problem: Problem | TaskProblem, key: str) -> float | None:
    """How far a stored problem key is from a problem: the sum of |log2| ratios of the sizes, plus a
    penalty for a different layout (a kernel for the other layout reads B differently). None when the
    key is not comparable (a task key for a GEMM, another task, or an unparsable key)."""
    if isinstance(problem, TaskProblem):
        if not key.startswith(problem.task + "_"):
            return None
        mine = dict(problem.sizes)
        try:
            theirs = {part.rstrip("0123456789"): int(part[len(part.rstrip("0123456789")):])
                      for part in key[len(problem.task) + 1:].split("_")}
        except ValueError:
            return None
        if set(theirs) != set(mine):
            return None
        return sum(abs(math.log2(max(1, mine[n]) / max(1, theirs[n]))) for n in mine)
    try:
        other = Problem.from_key(key)
    except (ValueError, IndexError):
        return None
    d = sum(abs(math.log2(getattr(problem, f) / getattr(other, f))) for f in ("M", "N", "K", "batch"))
    return d + (2.0 if other.layout != problem.layout else 0.0)

"""Reading the stages' result folders for the report; anything missing or unreadable is None."""

from __future__ import annotations

import csv
import json
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("hgemm.report")


def read_json(path: str | Path | None):
    if path is None or not Path(path).is_file():
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        log.warning("cannot read %s: %s", path, e)
        return None


def kernel_db_summary(path: str | Path, stage: str, top: int = 10) -> dict:
    """What a finished RL stage's kernel database (kernels.sqlite, written by training.kerneldb) holds of
    that stage's own training (not the rows other stages left, nor its held-out evaluations,
    `<stage>_heldout`): counts, status classes, the commonest failure messages and the best verified
    kernel per problem. The file is read with plain SQL over its `evaluations` table, read-only, so
    reading a committed results file never rewrites it."""
    # immutable: a finished stage's file; no lock files (-shm, -wal) appear beside a committed result
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    # the stage's rows only, as a view, so that every query below reads them unchanged
    conn.execute(f"CREATE TEMP VIEW own AS SELECT * FROM evaluations WHERE stage = {_sql_text(stage)}")
    try:
        one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        statuses = {r["status"]: r["n"] for r in conn.execute(
            "SELECT status, COUNT(*) AS n FROM own GROUP BY status ORDER BY n DESC")}
        errors: dict[str, int] = {}
        for (err,) in conn.execute("SELECT error FROM own WHERE status != 'ok' AND error != ''"):
            line = err.strip().splitlines()[0][:160] if err.strip() else ""
            errors[line] = errors.get(line, 0) + 1
        # A kernel's speedup is its lowest verified measurement on that problem, as training.kerneldb ranks them.
        best = [dict(r) for r in conn.execute(
            "SELECT problem_key, shape_class, sha, MAX(s) AS speedup_vs_best, time_us, speedup_vs_cublas FROM "
            "(SELECT problem_key, shape_class, sha, MIN(speedup_vs_best) AS s, MAX(time_us) AS time_us, "
            " MIN(speedup_vs_cublas) AS speedup_vs_cublas FROM own "
            " WHERE status = 'ok' AND speedup_vs_best IS NOT NULL GROUP BY problem_key, sha) "
            "GROUP BY problem_key ORDER BY speedup_vs_best DESC")]
        return {
            "evaluations": one("SELECT COUNT(*) FROM own"),
            "kernels": one("SELECT COUNT(DISTINCT sha) FROM own"),
            "problems": one("SELECT COUNT(DISTINCT problem_key) FROM own"),
            "steps": one("SELECT COUNT(DISTINCT step) FROM own"),
            "verified_problems": len(best),
            "statuses": statuses,
            "top_errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:5]),
            "best": [r | {"sha": r["sha"][:12]} for r in best[:top]],
        }
    finally:
        conn.close()


def _sql_text(value: str) -> str:
    """A string literal for SQL (a view cannot take parameters)."""
    return "'" + value.replace("'", "''") + "'"


@dataclass
class ReportInputs:
    """Folders of the stages the report draws on (None: not given)."""

    corpus: str | None = None
    pretrain: str | None = None
    rl_general: str | None = None
    rl_hgemm: str | None = None
    tune: str | None = None
    bench: str | None = None  # a bench stage folder (results.json) or a run_bench results file itself
    tokenizer: str | None = None
    sample: str | None = None
    library: str | None = None
    stage_times: str | None = None  # Snakemake's benchmark folder: one <stage>.tsv per job

    def kernel_db(self, stage: str) -> dict | None:
        """The summary of an RL stage's kernel database (kernel_db_summary), or None."""
        folder = getattr(self, stage)
        path = Path(folder) / "kernels.sqlite" if folder else None
        if path is None or not path.is_file():
            return None
        return kernel_db_summary(path, stage)

    def wall_times(self) -> list[tuple[str, float, float | None]]:
        """(stage, wall seconds, max RSS MB) of each stage Snakemake timed, in pipeline order."""
        order = ("corpus", "tokenizer", "tune", "pretrain", "rl_general", "rl_hgemm", "sample", "sample_pretrained",
                 "bench", "library", "report")
        rows = []
        folder = Path(self.stage_times) if self.stage_times else None
        for stage in order:
            path = folder / f"{stage}.tsv" if folder else None
            if path is None or not path.is_file():
                continue
            with open(path) as f:
                first = next(csv.DictReader(f, delimiter="\t"), None)
            if first and first.get("s"):
                rss = first.get("max_rss")
                rows.append((stage, float(first["s"]), float(rss) if rss not in (None, "", "-") else None))
        return rows

    def bench_results(self) -> dict | None:
        if not self.bench:
            return None
        path = Path(self.bench)
        return read_json(path if path.is_file() else path / "results.json")

    def metrics(self, stage: str) -> dict | None:
        folder = getattr(self, stage)
        return read_json(Path(folder) / "metrics.json") if folder else None

    def curves(self, stage: str) -> list[dict] | None:
        folder = getattr(self, stage)
        data = read_json(Path(folder) / "curves.json") if folder else None
        if isinstance(data, dict):  # tolerate {"curves": [...]} or {"steps": [...]}
            data = next((v for v in data.values() if isinstance(v, list)), None)
        return [row for row in data if isinstance(row, dict)] if isinstance(data, list) else None

    def corpus_stats(self) -> dict | None:
        """The corpus stage's stats.json (its stats.md is the same numbers as Markdown)."""
        return read_json(Path(self.corpus) / "stats.json") if self.corpus else None

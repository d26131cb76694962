"""Reading the stages' result folders for the report; anything missing or unreadable is None."""

from __future__ import annotations

import json
import logging
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
    stage_times: str | None = None  # Snakemake's benchmark folder: one <stage>.tsv per job

    def kernel_db(self, stage: str) -> dict | None:
        """The summary of an RL stage's kernel database (training.kerneldb.summarize), or None."""
        folder = getattr(self, stage)
        path = Path(folder) / "kernels.sqlite" if folder else None
        if path is None or not path.is_file():
            return None
        from training.kerneldb import summarize

        return summarize(path)

    def wall_times(self) -> list[tuple[str, float, float | None]]:
        """(stage, wall seconds, max RSS MB) of each stage Snakemake timed, in pipeline order."""
        import csv

        order = ("corpus", "tokenizer", "tune", "pretrain", "rl_general", "rl_hgemm", "sample", "bench", "report")
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

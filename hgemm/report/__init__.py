"""The pipeline report: tables and figures over the stages' result files, as Markdown and HTML.

    from hgemm.report import build_report
    build_report(inputs, settings, out_dir)

`inputs.py` reads whatever result files exist (a missing one becomes a "not available" section, never
an exception), `tables.py` turns a bench results file into per-shape rows, `figures.py` draws the
PNGs with matplotlib, and `render.py` writes one document model out as report.md and report.html.
"""

from .build import ReportSettings, build_report

__all__ = ["ReportSettings", "build_report"]

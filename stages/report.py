"""Stage: the report (HTML and Markdown) over every stage's results; see hgemm/report/.

    python -m stages.report --config configs/default.yaml --corpus results/corpus --pretrain results/pretrain \\
        --rl-general results/rl_general --rl-hgemm results/rl_hgemm --tune results/tune --bench results/bench \\
        --out results/report

Every input is optional: a missing folder or file becomes a "not available" section. Without a GPU
run the report says at the top that nothing was timed.
"""

from __future__ import annotations

import argparse
import logging
import sys

from hgemm.report import ReportSettings, build_report
from hgemm.report.inputs import ReportInputs
from stages.common import write_metrics
from stages.config_schema import load_settings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stages.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, action="append",
                    help="experiment config with a 'report:' section (configs/default.yaml), or YAML with the report "
                         "settings; repeatable: each file laid over the one before")
    ap.add_argument("--corpus", help="corpus stage folder (stats.json, stats.md)")
    ap.add_argument("--pretrain", help="pretrain stage folder (metrics.json)")
    ap.add_argument("--rl-general", dest="rl_general", help="rl_general stage folder (curves.json, metrics.json)")
    ap.add_argument("--rl-hgemm", dest="rl_hgemm", help="rl_hgemm stage folder (curves.json, metrics.json)")
    ap.add_argument("--tune", help="tune stage folder (metrics.json)")
    ap.add_argument("--bench", help="bench stage folder (results.json), or any `hgemm bench` results file")
    ap.add_argument("--tokenizer", help="tokenizer stage folder (metrics.json)")
    ap.add_argument("--sample", help="sample stage folder (metrics.json)")
    ap.add_argument("--library", help="library stage folder (metrics.json, owned.md)")
    ap.add_argument("--stage-times", dest="stage_times", help="Snakemake benchmark folder (<stage>.tsv wall times)")
    ap.add_argument("--out", required=True, help="output folder: report.html, report.md, figures/, metrics.json")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one setting (value parsed as YAML); repeatable")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    settings = load_settings(ReportSettings, "report", args.config, args.overrides, ap.prog)
    inputs = ReportInputs(corpus=args.corpus, pretrain=args.pretrain, rl_general=args.rl_general,
                          rl_hgemm=args.rl_hgemm, tune=args.tune, bench=args.bench, tokenizer=args.tokenizer,
                          sample=args.sample, library=args.library, stage_times=args.stage_times)
    summary = build_report(inputs, settings, args.out)
    write_metrics(args.out, {"stage": "report", **summary})
    print(f"report: {'benched' if summary['timed'] else 'NO BENCH RESULTS'}, {summary['figures']} figures, "
          f"{summary['not_available']} parts not available -> {args.out}/report.html", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

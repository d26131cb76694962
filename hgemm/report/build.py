"""Assemble the report document from the stages' results, section by section."""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass
from pathlib import Path

from hgemm.summary import class_rows, geomean

from . import tables
from .figures import curves_figure, speedup_heatmaps, tflops_vs_size
from .inputs import ReportInputs
from .render import cell_text, to_html, to_markdown

log = logging.getLogger("hgemm.report")
NOT_TIMED = ("Nothing was timed: this run had no GPU. Kernels were parsed and compiled only, so no "
             "time, TFLOP/s or speedup below is a measurement.")


@dataclass
class ReportSettings:
    """The `report:` section (values: configs/default.yaml)."""

    title: str
    peak_tflops: float  # the GPU's dense fp16/bf16 tensor-core peak, for the compute roofline
    memory_tbps: float  # the GPU's memory bandwidth, for the memory roofline
    max_heatmap_panels: int


def _figure(doc: list, name: str, make, caption: str) -> None:
    """Add a figure, or say why there is none (no matplotlib, nothing to plot): never fail the report."""
    try:
        png = make()
    except ImportError as e:
        doc.append(("p", f"Figure not available: matplotlib is not installed ({e})."))
        return
    if png is None:
        doc.append(("p", f"Figure not available: no data for {caption.lower()}."))
    else:
        doc.append(("figure", name, png, caption))


def _not_available(doc: list, what: str, path: str | None) -> None:
    doc.append(("p", f"Not available: no {what} found" + (f" under `{path}`." if path else " (not given).")))


def _listing(names: list[str]) -> str:
    """a; a and b; a, b and c"""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _plural(n, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _heatmap_caption(rows: list[dict]) -> str:
    """Name the panels speedup_heatmaps draws for these rows: per K for batch 1, per batch size."""
    drawn = [r["problem"] for r in rows if r["speedup_vs_best"]]
    kinds = (["one panel per K (batch 1)"] if any(p.batch == 1 for p in drawn) else []) + \
            (["one per batch size"] if any(p.batch > 1 for p in drawn) else [])
    return ("Speedup of the kernel over the strongest baseline on M × N, " + _listing(kinds or ["no panel"])
            + ", per layout")


def _timing_sentence(results: dict, rows: list, timed: bool) -> str:
    grid = f"{len(rows)} shapes from `{results.get('grid', '?')}`"
    if not timed:
        return f"{grid}; compiled only, nothing was timed."
    options = results.get("options", {})
    reps = options.get("reps", "?")
    return (f"{grid}; timing method `{options.get('timing_method', '?')}`, "
            f"{_plural(reps, 'repetition') if isinstance(reps, int) else f'{reps} repetitions'}, cold L2, median.")


def bench_sections(doc: list, results: dict | None, settings: ReportSettings, source: str | None,
                   sample: dict | None = None) -> None:
    """sample: the sample stage's metrics, to say how the model's kernels were drawn."""
    doc.append(("h", 2, "Kernels against the baselines"))
    if results is None:
        _not_available(doc, "bench results (results.json)", source)
        return
    timed = bool(results.get("gpu_run"))
    rows = tables.shape_rows(results)
    doc.append(("p", _timing_sentence(results, rows, timed)))
    if sample and sample.get("prompts"):
        doc.append(("p", f"The model's kernel for a shape is the best of {sample.get('k', '?')} samples from "
                         f"{sample['prompts']} prompts ({sample.get('prompts_with_context', 0)} of "
                         f"{sample.get('shapes', '?')} shapes had context examples)."))
    if sample and sample.get("verbatim_corpus_samples") is not None:
        doc.append(("p", f"{sample['verbatim_corpus_samples']} of the {sample.get('samples', '?')} sampled kernels are a "
                         f"corpus document's kernel character for character, {sample['verbatim_corpus_best']} of the "
                         f"{sample.get('shapes_with_best', '?')} kept as a shape's best."))
    if sample and sample.get("distinct_kernels_per_shape") is not None:
        held = sample.get("heldout_distinct_kernels_per_shape")
        doc.append(("p", f"A shape's {sample.get('k', '?')} samples hold {sample['distinct_kernels_per_shape']:.1f} "
                         "distinct kernels on average" + (f" ({held:.1f} on held-out shapes)" if held is not None else "")
                         + f"; {sample.get('samples_copying_an_example', 0)} samples write out a kernel their prompt "
                         f"shows, and on {sample.get('shapes_sampling_the_last_example', 0)} of "
                         f"{sample.get('shapes', '?')} shapes ({sample.get('heldout_shapes_sampling_the_last_example', 0)} "
                         f"of {sample.get('heldout_shapes', '?')} held out) some sample writes out the last one "
                         "(the shape's own fastest kernel, or the library's choice where nothing measured the shape)."))
    speedups = [r["speedup_vs_best"] for r in rows if r["speedup_vs_best"]]
    if timed and speedups:
        # Name whose kernels these are: the model's where it has a verified one, else the seed library's.
        by_model = sum(r["kernel"] == "model" for r in rows)
        others = ", ".join(sorted({r["kernel"] for r in rows if r["kernel"] and r["kernel"] != "model"}))
        who = ("The model's kernel" if by_model == len(rows) else
               f"The model's kernel where verified ({by_model} shapes), else the fastest of {others}," if by_model else
               f"No model-written kernel is among these results; the fastest verified candidate ({others})")
        doc.append(("p", f"{who} is faster than the strongest baseline on {sum(s > 1 for s in speedups)} of {len(rows)} "
                         f"shapes; geomean speedup {geomean(speedups):.3f}x over {len(speedups)} verified shapes."))
    doc.append(("h", 3, "Per shape class"))
    doc.append(("table", ["class", "candidate", "shapes", "ok", "geomean vs cuBLAS", "geomean vs strongest", "worst"],
                [[r["class"], r["candidate"], r["shapes"], r["ok"], tables.fmt(r["geomean_vs_cublas"], 3),
                  tables.fmt(r["geomean_vs_best"], 3), tables.fmt(r["min_vs_best"], 3)] for r in class_rows(results)]))
    doc.append(("h", 3, "Per shape"))
    headers, cells = tables.per_shape_table(rows, timed)
    doc.append(("table", headers, cells))
    held = tables.heldout_rows(results)
    if held:
        doc.append(("h", 3, "Held-out shapes"))
        if timed:
            sentence, headers, cells = tables.heldout_table(held)
            doc.append(("p", sentence))
            doc.append(("table", headers, cells))
        else:
            doc.append(("p", f"{len(held)} held-out shapes are marked in the per-shape table (column "
                             f"“{tables.HELDOUT_MARK}”); nothing was timed, so the model-vs-library comparison "
                             "needs a GPU run."))
    if timed and results.get("before"):
        doc.append(("h", 3, "What RL changed on the held-out shapes"))
        sentence, headers, cells = tables.before_after_table(tables.before_after_rows(results))
        doc.append(("p", sentence))
        doc.append(("table", headers, cells))
    if not timed:
        doc.append(("p", "Heatmaps and TFLOP/s plots need timings: not available on a CPU-only run."))
        return
    doc.append(("h", 3, "Speedup over M × N"))
    _figure(doc, "speedup_heatmaps", lambda: tables_heatmaps(rows, settings), _heatmap_caption(rows))
    doc.append(("h", 3, "Throughput"))
    with_cublas = "cuBLAS, " if any(r["cublas_tflops"] for r in rows) else ""
    _figure(doc, "tflops_vs_size", lambda: tflops_vs_size(rows, settings.peak_tflops, settings.memory_tbps),
            f"TFLOP/s vs problem size and arithmetic intensity, with {with_cublas}the strongest baseline, "
            "peak and memory roofline")


def tables_heatmaps(rows, settings):
    return speedup_heatmaps(rows, settings.max_heatmap_panels)


def curve_sections(doc: list, inputs: ReportInputs) -> None:
    doc.append(("h", 2, "Reinforcement learning curves"))
    for stage, label in (("rl_general", "General kernel tasks (rl_general)"), ("rl_hgemm", "HGEMM (rl_hgemm)")):
        doc.append(("h", 3, label))
        curves = inputs.curves(stage)
        if not curves:
            _not_available(doc, f"{stage} curves.json", getattr(inputs, stage))
            continue
        groups = tables.curve_keys(curves)
        # the caption names the panels drawn: a run without verified kernels logs no speedup column
        _figure(doc, f"curves_{stage}", lambda: curves_figure(curves, groups, label),
                f"{_listing(list(groups)).capitalize()} curves of {stage}")
        if not any(row.get("correct_rate") for row in curves):
            # Without one verified completion every reward is a failure class (plus format shaping):
            # the curves then show format learning at most, never speed.
            doc.append(("p", f"No {stage} completion passed verification in any step, so its rewards came from "
                             "failure classes and format shaping only: these curves carry no speed signal."))
        keys = [k for ks in groups.values() for k in ks]
        if keys:
            headers, cells = tables.first_last_table(curves, keys)
            doc.append(("table", headers, cells))
        if (timing := tables.step_time_table(curves)) is not None:
            doc.append(("p", "Where a step's time went (the judge's phases: its compiles; its GPU evaluations' "
                             "references, verification, timing set-up, cuBLASLt's algorithm choice, timed batches, "
                             "after timing; and the worker pool's rest, from worker starts to hung kernels' timeouts):"))
            doc.append(("table", *timing))
        metrics = inputs.metrics(stage) or {}
        if metrics.get("heldout_curve"):
            headers, cells = tables.heldout_curve_table(metrics["heldout_curve"])
            doc.append(("p", "Held-out shapes (never trained on) sampled and judged during training, every "
                             "evaluation step (rl_hgemm.shapes.heldout_eval):"))
            doc.append(("table", headers, cells))
        # the first and last steps drew different prompts; the probe compares like with like
        for key, lead in (("probe", ""), ("probe_context", "With the contrastive context of the final kernel "
                                                         "database in each prompt: ")):
            probe = metrics.get(key) or {}
            if probe.get("change"):
                sentence, headers, cells = tables.probe_table(probe)
                doc.append(("p", lead + sentence))
                doc.append(("table", headers, cells))


def kernel_db_section(doc: list, inputs: ReportInputs) -> None:
    """Every candidate the RL stages evaluated, from their kernel databases: what became of them and the
    best verified kernel per problem."""
    doc.append(("h", 2, "Kernel database"))
    for stage in ("rl_general", "rl_hgemm"):
        doc.append(("h", 3, stage))
        db = inputs.kernel_db(stage)
        if db is None:
            _not_available(doc, f"{stage} kernels.sqlite", getattr(inputs, stage))
            continue
        doc.append(("p", f"{db['evaluations']:,} evaluations of {db['kernels']:,} distinct kernels on "
                         f"{db['problems']} problems over {db['steps']} steps; {db['verified_problems']} problems "
                         "have a verified kernel."))
        doc.append(("table", ["status", "evaluations"], [[k, f"{v:,}"] for k, v in db["statuses"].items()]))
        if db["best"]:
            doc.append(("table", ["problem", "class", "best kernel (sha)", "µs", "speedup vs strongest", "vs cuBLAS"],
                        [[r["problem_key"], r["shape_class"] or "", r["sha"], tables.fmt(r["time_us"], 1),
                          tables.fmt(r["speedup_vs_best"], 3), tables.fmt(r["speedup_vs_cublas"], 3)]
                         for r in db["best"]]))
        if db["top_errors"]:
            doc.append(("table", ["commonest failure (first line)", "count"],
                        [[e, str(n)] for e, n in db["top_errors"].items()]))


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else cell_text(value)


def _records_table(doc: list, records) -> None:
    """A list of dicts (stats.json's by_source, by_licence) as a table, counts with thousands separators."""
    if records and isinstance(records[0], dict):
        keys = list(records[0])
        doc.append(("table", keys, [[_count(r.get(k)) for k in keys] for r in records]))


def corpus_section(doc: list, inputs: ReportInputs) -> None:
    """The corpus stage's stats.json as sentences and tables (its stats.md says the same in Markdown)."""
    doc.append(("h", 2, "Corpus"))
    stats = inputs.corpus_stats()
    if stats is None:
        _not_available(doc, "corpus statistics (stats.json)", inputs.corpus)
        return
    total = stats.get("total", {})
    doc.append(("p", f"{_count(total.get('docs', total.get('documents')))} documents, "
                     f"{_count(total.get('bytes'))} bytes, {_count(total.get('tokens'))} tokens "
                     f"({stats.get('token_unit', 'tokens')})."))
    for title, key in (("By source", "by_source"), ("By licence", "by_licence")):
        if stats.get(key):
            doc.append(("h", 3, title))
            _records_table(doc, stats[key])
    splits = stats.get("splits") or {}
    if splits:
        doc.append(("h", 3, "Splits"))
        doc.append(("table", ["split", "docs", "bytes", "tokens"],
                    [[name, *(_count(s.get(k)) for k in ("docs", "bytes", "tokens"))] for name, s in splits.items()]))
    steps = [(name, stats.get(key) or {}) for name, key in (("filters", "filters"), ("dedup", "dedup"),
                                                             ("decontam", "decontam"))]
    rows = [[name, _count(step.get("input", step.get("docs_checked"))),
             _count(_removed(name, step))] for name, step in steps if step]
    if rows:
        doc.append(("h", 3, "Pipeline"))
        doc.append(("table", ["step", "in", "removed"], rows))
    if stats.get("missing_sources"):
        doc.append(("p", "Missing sources (skipped): " + ", ".join(stats["missing_sources"]) + "."))


def _removed(step: str, data: dict):
    if step == "filters":
        return sum((data.get("dropped") or {}).values()) if data.get("dropped") is not None else None
    if step == "dedup":
        parts = [data.get("exact_duplicates"), data.get("near_duplicates")]
        return sum(parts) if all(isinstance(x, int) for x in parts) else None
    return data.get("docs_dropped")


def library_section(doc: list, inputs: ReportInputs) -> None:
    """The library behind hgemm.matmul: how many shapes, and which of them the model's kernels own."""
    m = inputs.metrics("library")
    if m is None:
        return
    doc.append(("h", 2, "The library behind hgemm.matmul"))
    if not m.get("timed"):
        doc.append(("p", f"{m['shapes']} tuned shapes, all the seed families': nothing was timed, so the model owns none."))
        return
    owned = m.get("model_owned") or []
    text = (f"{m['shapes']} tuned shapes; the model's kernels own {len(owned)}, each at least "
            f"{m['settings']['own_margin']:.2f}x as fast as the library kernel it replaced in the bench run")
    if owned:
        text += f" (geomean {m['geomean_model_vs_replaced_kernel']:.3f}x): " + ", ".join(owned)
    doc.append(("p", text + "."))


def metrics_section(doc: list, inputs: ReportInputs) -> None:
    doc.append(("h", 2, "Stage metrics"))
    times = inputs.wall_times()
    if times:
        total = sum(t for _, t, _ in times)
        doc.append(("p", f"Wall time of each stage Snakemake ran; their sum is {total:,.0f} s "
                         "(stages that ran in parallel overlap)."))
        doc.append(("table", ["stage", "wall s", "max RSS MB"],
                    [[stage, f"{t:,.1f}", tables.fmt(rss, 0) if rss is not None else "—"] for stage, t, rss in times]))
    rows = []
    for stage in ("corpus", "tokenizer", "pretrain", "tune", "rl_general", "rl_hgemm", "sample", "bench", "library"):
        m = inputs.metrics(stage)
        if m is None:
            rows.append([stage, "not available", ""])
            continue
        for k, v in m.items():
            if isinstance(v, (int, float, str)) and not isinstance(v, bool) or v is None:
                rows.append([stage, k, tables.fmt(v, 4) if isinstance(v, float) else cell_text(v)[:120]])
    doc.append(("table", ["stage", "metric", "value"], rows))


def environment_section(doc: list, results: dict | None) -> None:
    doc.append(("h", 2, "Environment"))
    env = (results or {}).get("env", {})
    gpus = env.get("gpus") or []
    rows = [["report built on", f"{platform.node()}, Python {platform.python_version()}, {platform.platform()}"]]
    if env:
        rows += [["bench host", f"{env.get('host')}, Python {env.get('python')}, {env.get('platform')}"],
                 ["bench time (UTC)", str(env.get("time_utc"))], ["nvcc", str(env.get("nvcc"))],
                 ["arch", str((results or {}).get("arch"))], ["timing method", str(env.get("timing_method"))]]
        for i, g in enumerate(gpus):
            rows.append([f"GPU {i}", ", ".join(f"{k} {v}" for k, v in g.items())])
        if not gpus:
            rows.append(["GPU", "none"])
        rows += [[f"package {k}", str(v)] for k, v in (env.get("packages") or {}).items()]
    else:
        rows.append(["bench environment", "not available (no bench results)"])
    doc.append(("table", ["what", "value"], rows))


def _no_bench_banner(inputs: ReportInputs) -> str:
    """Without bench results: whether the stages that time on their own (the RL rewards, the sample
    stage's best of k) did, so that their figures are not taken for compile-only ones."""
    timed = [s for s in ("rl_general", "rl_hgemm", "sample") if (inputs.metrics(s) or {}).get("timed")]
    if not timed:
        return "Nothing was timed: no bench results are available."
    return (f"No bench results: no kernel was timed beside the library's choice. The figures of "
            f"{', '.join(timed)} were timed on the GPU, each in its own stage.")


def build_report(inputs: ReportInputs, settings: ReportSettings, out_dir: str | Path) -> dict:
    """Write report.md (with figures/) and report.html (self-contained); returns a short summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = inputs.bench_results()
    timed = bool(results and results.get("gpu_run"))
    doc: list[tuple] = [("h", 1, settings.title)]
    if not timed:
        doc.append(("banner", NOT_TIMED if results else _no_bench_banner(inputs)))
    bench_sections(doc, results, settings, inputs.bench, inputs.metrics("sample"))
    library_section(doc, inputs)
    curve_sections(doc, inputs)
    kernel_db_section(doc, inputs)
    corpus_section(doc, inputs)
    metrics_section(doc, inputs)
    environment_section(doc, results)
    (out / "report.md").write_text(to_markdown(doc, out / "figures"))
    (out / "report.html").write_text(to_html(doc, settings.title))
    return {"timed": timed, "figures": sum(b[0] == "figure" for b in doc),
            "sections": [b[2] for b in doc if b[0] == "h" and b[1] == 2],
            "not_available": sum(b[0] == "p" and b[1].startswith(("Not available", "Figure not available")) for b in doc)}

"""The report's PNG figures (matplotlib, Agg backend: no display needed). Each returns PNG bytes,
or None when there is nothing to draw."""

from __future__ import annotations

import io
import math
from collections import defaultdict


def _plt():
    # matplotlib (about a second to import) only when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): pyplot picks its backend on import

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def speedup_heatmaps(rows: list[dict], max_panels: int = 12) -> bytes | None:
    """Speedup over the strongest baseline on an M x N grid: one panel per K (batch 1) and one per
    batch (batch > 1), each per layout. Colour is log2(speedup): red slower, blue faster."""
    panels: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    for row in rows:
        s, p = row["speedup_vs_best"], row["problem"]
        if not s:
            continue
        title = f"K={p.K}" if p.batch == 1 else f"batch={p.batch}"
        panels[f"{title} {p.layout}"][(p.M, p.N)] = s
    if not panels:
        return None
    # the panels with the most shapes carry the most information
    chosen = sorted(panels.items(), key=lambda kv: -len(kv[1]))[:max_panels]
    plt = _plt()
    cols = min(4, len(chosen))
    nrows = math.ceil(len(chosen) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 3.2 * nrows), squeeze=False)
    image = None
    for ax, (title, cells) in zip(axes.flat, chosen):
        ms = sorted({m for m, _ in cells})
        ns = sorted({n for _, n in cells})
        grid = [[math.log2(cells[(m, n)]) if (m, n) in cells else float("nan") for n in ns] for m in ms]
        image = ax.imshow(grid, cmap="RdBu", vmin=-2, vmax=2, aspect="auto")
        ax.set_xticks(range(len(ns)), [str(n) for n in ns], rotation=45, fontsize=7)
        ax.set_yticks(range(len(ms)), [str(m) for m in ms], fontsize=7)
        ax.set_xlabel("N", fontsize=8)
        ax.set_ylabel("M", fontsize=8)
        ax.set_title(title, fontsize=9)
        for i, m in enumerate(ms):
            for j, n in enumerate(ns):
                if (m, n) in cells:
                    dark = abs(math.log2(cells[(m, n)])) > 1.2  # black on the deep ends of the map is unreadable
                    ax.text(j, i, f"{cells[(m, n)]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    fig.subplots_adjust(hspace=0.55, wspace=0.35)
    fig.colorbar(image, ax=axes, shrink=0.8, label="log2 speedup vs strongest baseline")
    return _png(fig)


def tflops_vs_size(rows: list[dict], peak_tflops: float, memory_tbps: float) -> bytes | None:
    """Left: TFLOP/s against FLOPs per GEMM with cuBLAS, the strongest baseline, the datasheet peak,
    the best measured rate and each shape's memory-roofline bound. Right: the same points against
    arithmetic intensity, with the classic roofline."""
    pts = [r for r in rows if r["tflops"] or r["cublas_tflops"]]
    if not pts:
        return None
    pts.sort(key=lambda r: r["problem"].flops)
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    flops = [r["problem"].flops for r in pts]
    intensity = [r["problem"].flops / r["problem"].min_bytes for r in pts]
    roof = [min(peak_tflops, ai * memory_tbps) for ai in intensity]  # TB/s x FLOP/B = TFLOP/s
    measured = max(x for r in pts for x in (r["tflops"], r["cublas_tflops"], r["best_baseline_tflops"]) if x)
    for ax, xs in ((left, flops), (right, intensity)):
        series = (("kernel", [r["tflops"] for r in pts], "o", "C0"),
                  ("cuBLAS", [r["cublas_tflops"] for r in pts], "s", "C1"),
                  ("strongest baseline", [r["best_baseline_tflops"] for r in pts], "^", "C2"))
        for label, ys, marker, colour in series:
            xy = [(x, y) for x, y in zip(xs, ys) if y]
            if xy:
                ax.scatter(*zip(*xy), label=label, marker=marker, s=18, color=colour, alpha=0.8)
        ax.axhline(peak_tflops, color="k", ls="--", lw=1, label=f"datasheet peak {peak_tflops:g}")
        ax.axhline(measured, color="gray", ls=":", lw=1, label=f"best measured {measured:.0f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, which="both", alpha=0.2)
    # the bandwidth bound depends on each shape's intensity, not its size: one tick per shape
    left.scatter(flops, roof, color="C3", marker="_", s=80, label=f"memory-roofline bound ({memory_tbps:g} TB/s)")
    left.set_xlabel("FLOPs per GEMM (2·batch·M·N·K)")
    left.set_title("TFLOP/s vs problem size")
    xs = sorted(intensity)
    right.plot(xs, [min(peak_tflops, x * memory_tbps) for x in xs], color="C3", lw=1, label="roofline")
    right.set_xlabel("arithmetic intensity (FLOP per byte moved, at least)")
    right.set_title("Roofline")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    return _png(fig)


def _is_rate(key: str) -> bool:
    return key.endswith("_rate")


def curves_figure(curves: list[dict], groups: dict[str, list[str]], title: str) -> bytes | None:
    """One panel per group of curve columns (tables.curve_keys). A panel of rates spans 0..1 whatever
    the data: all-zero rates then read as zero, not as noise around it on an axis of ±0.04."""
    if not curves or not groups:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.2), squeeze=False)
    for ax, (group, keys) in zip(axes.flat, groups.items()):
        for k in keys:
            xy = [(row.get("step", i), row[k]) for i, row in enumerate(curves) if isinstance(row.get(k), (int, float))]
            if xy:
                ax.plot(*zip(*xy), label=k, lw=1.2, marker="o" if len(xy) == 1 else None)
        if all(_is_rate(k) for k in keys):
            ax.set_ylim(-0.03, 1.03)
        ax.set_title(group, fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10, y=1.03)  # above the panel titles, not on them
    return _png(fig)

"""Per-shape rows of a run_bench results file: the kernel, every baseline, the strongest, speedups.

"The kernel" of a shape is the `model` contender when the bench stage wrote the file and the model's
kernel verified; otherwise the fastest verified candidate (e.g. in a plain `hgemm bench` file)."""

from __future__ import annotations

import math
import random

from hgemm.problem import Problem
from hgemm.summary import measurably_faster


def baseline_us(entry: dict) -> float | None:
    return entry.get("time_us") or (entry.get("timing") or {}).get("median_us")


def shape_row(pr: dict) -> dict:
    p = Problem.from_dict(pr["problem"])
    ok = {n: r for n, r in pr.get("candidates", {}).items() if r.get("status") == "ok" and r.get("time_us")}
    if "model" in ok:
        name = "model"
    else:
        name = min(ok, key=lambda n: ok[n]["time_us"]) if ok else None
    r = ok.get(name, {})
    baselines = {b: baseline_us(e) for b, e in (pr.get("baselines") or {}).items() if baseline_us(e)}
    lib = ok.get("library", {})
    return {
        "problem": p, "key": p.key, "class": p.shape_class, "kernel": name,
        "time_us": r.get("time_us"), "tflops": r.get("tflops"),
        "baselines_us": baselines,
        "cublas_tflops": ((pr.get("baselines") or {}).get("cublas") or {}).get("tflops"),
        "best_baseline": pr.get("best_baseline"), "best_baseline_us": pr.get("best_baseline_us"),
        "best_baseline_tflops": ((pr.get("baselines") or {}).get(pr.get("best_baseline") or "") or {}).get("tflops"),
        "speedup_vs_best": r.get("speedup_vs_best"), "speedup_vs_cublas": r.get("speedup_vs_cublas"),
        "vs_library": (lib["time_us"] / r["time_us"]) if name == "model" and lib.get("time_us") else None,
        "statuses": {n: c.get("status", "?") for n, c in pr.get("candidates", {}).items()},
        "heldout": bool(pr.get("heldout")),
    }


def shape_rows(results: dict) -> list[dict]:
    return [shape_row(pr) for pr in results.get("problems", [])]


def baseline_names(rows: list[dict]) -> list[str]:
    names: list[str] = []
    for row in rows:
        names += [b for b in row["baselines_us"] if b not in names]
    return names


def fmt(x, digits: int = 2) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


HELDOUT_MARK = "held out"  # the per-shape table's column that marks shapes never trained on


def per_shape_table(rows: list[dict], timed: bool) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the per-shape table (statuses only when nothing was timed). Where any shape
    was held out of training, a column after the class marks which."""
    headers, cells = _timed_table(rows) if timed else _status_table(rows)
    if any(row["heldout"] for row in rows):
        headers = headers[:2] + [HELDOUT_MARK] + headers[2:]
        cells = [c[:2] + ["yes" if row["heldout"] else ""] + c[2:] for c, row in zip(cells, rows)]
    return headers, cells


def _status_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    names = sorted({n for row in rows for n in row["statuses"]})
    return (["shape", "class"] + [f"{n} status" for n in names],
            [[row["key"], row["class"]] + [row["statuses"].get(n, "—") for n in names] for row in rows])


def _timed_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    bls = baseline_names(rows)
    with_library = any(row["vs_library"] for row in rows)
    headers = (["shape", "class", "kernel", "µs", "TFLOP/s"] + [f"{b} µs" for b in bls]
               + ["strongest baseline", "speedup vs strongest", "speedup vs cuBLAS"]
               + (["speedup vs library"] if with_library else []))
    cells = []
    for row in rows:
        cells.append([row["key"], row["class"], row["kernel"] or "none verified", fmt(row["time_us"], 1),
                      fmt(row["tflops"], 1)] + [fmt(row["baselines_us"].get(b), 1) for b in bls]
                     + [row["best_baseline"] or "—", fmt(row["speedup_vs_best"], 3), fmt(row["speedup_vs_cublas"], 3)]
                     + ([fmt(row["vs_library"], 3)] if with_library else []))
    return headers, cells


def heldout_rows(results: dict) -> list[dict]:
    """One row per held-out shape of a bench stage results file: the model's best-of-k and the library
    kernel, each against the strongest baseline and against each other. A shape where the model kept
    no verified kernel stays in, with its status, and counts as not beating the library."""
    rows = []
    for pr in results.get("problems", []):
        if not pr.get("heldout"):
            continue
        c = pr.get("candidates", {})
        model, lib = c.get("model", {}), c.get("library", {})
        same = bool((pr.get("kernels") or {}).get("model_is_library_kernel"))
        m_ok = model.get("status") == "ok" and model.get("time_us")
        l_ok = lib.get("status") == "ok" and lib.get("time_us")
        rows.append({
            "key": Problem.from_dict(pr["problem"]).key, "class": pr["problem"].get("shape_class", ""),
            "best_baseline": pr.get("best_baseline"), "best_baseline_us": pr.get("best_baseline_us"),
            "model_status": model.get("status", "no kernel kept"), "library_status": lib.get("status", "none"),
            "model_us": model.get("time_us") if m_ok else None, "library_us": lib.get("time_us") if l_ok else None,
            "model_vs_best": model.get("speedup_vs_best") if m_ok else None,
            "library_vs_best": lib.get("speedup_vs_best") if l_ok else None,
            "model_vs_library": lib["time_us"] / model["time_us"] if m_ok and l_ok else None,
            "same_kernel": same,
            "library_kernel": (pr.get("kernels") or {}).get("model_library_kernel"),
            "beats_library": bool(m_ok and l_ok) and not same and measurably_faster(model, lib),
        })
    return rows


def heldout_table(rows: list[dict]) -> tuple[str, list[str], list[list[str]]]:
    """(sentence, headers, cells) for the held-out rows; the sentence gives the share that beats the library
    (another kernel, faster beyond the run's repetition spread) and where the model wrote the library's own."""
    wins = sum(r["beats_library"] for r in rows)
    own = sum(r["beats_library"] and r["library_kernel"] is not None for r in rows)
    same = sum(r["same_kernel"] for r in rows)
    verified = sum(r["model_us"] is not None for r in rows)
    sentence = (f"{len(rows)} held-out shapes (never trained on): the model kept a verified kernel for {verified}, "
                f"and its kernel beats the seed library's on {wins} of {len(rows)} ({wins / len(rows):.0%}): another "
                f"kernel, faster beyond the run's repetition spread; {own} of these wins are kernels the library "
                f"holds for other shapes (a better choice among its kernels than its dispatch made), "
                f"{wins - own} kernels it does not hold. On {same} it wrote the library's own kernel for the shape.")
    headers = ["shape", "class", "strongest baseline", "its µs", "model (best of k)", "model vs strongest",
               "library vs strongest", "model vs library"]
    cells = [[r["key"], r["class"], r["best_baseline"] or "—", fmt(r["best_baseline_us"], 1),
              fmt(r["model_us"], 1) + " µs" if r["model_us"] is not None else r["model_status"],
              fmt(r["model_vs_best"], 3), fmt(r["library_vs_best"], 3),
              fmt(r["model_vs_library"], 3) + (" (its kernel)" if r["same_kernel"] else "")]
             for r in rows]
    return sentence, headers, cells


BOOTSTRAP_SAMPLES = 10_000


def before_after_rows(results: dict) -> list[dict]:
    """One row per held-out shape of a bench stage results file with a `before` contender run (the
    pretrained model's best of k on the same prompts): both kernels' status and time, and the
    before / after time where both verified (above 1: the RL-trained model's kernel is faster)."""
    rows = []
    for pr in results.get("problems", []):
        if not pr.get("heldout"):
            continue
        c = pr.get("candidates", {})
        after, before = c.get("model", {}), c.get("before", {})
        a_ok = after.get("status") == "ok" and after.get("time_us")
        b_ok = before.get("status") == "ok" and before.get("time_us")
        rows.append({"key": Problem.from_dict(pr["problem"]).key,
                     "after_status": after.get("status", "no kernel kept"),
                     "before_status": before.get("status", "no kernel kept"),
                     "after_us": after["time_us"] if a_ok else None, "before_us": before["time_us"] if b_ok else None,
                     "after_vs_best": after.get("speedup_vs_best") if a_ok else None,
                     "before_vs_best": before.get("speedup_vs_best") if b_ok else None,
                     "after_vs_before": before["time_us"] / after["time_us"] if a_ok and b_ok else None})
    return rows


def before_after(rows: list[dict], seed: int = 0) -> dict:
    """Geomean of after_vs_before over the shapes where both kernels verified, with a 95% bootstrap
    interval over those shapes (resampled with replacement, seeded), and the counts of shapes where only
    one of the two models kept a verified kernel."""
    ratios = [r["after_vs_before"] for r in rows if r["after_vs_before"]]
    out = {"shapes": len(ratios), "after_only": sum(bool(r["after_us"]) and not r["before_us"] for r in rows),
           "before_only": sum(bool(r["before_us"]) and not r["after_us"] for r in rows),
           "geomean": None, "ci95": None}
    if not ratios:
        return out
    logs = [math.log(x) for x in ratios]
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(logs, k=len(logs))) / len(logs) for _ in range(BOOTSTRAP_SAMPLES))
    lo, hi = means[int(0.025 * len(means))], means[int(0.975 * len(means)) - 1]
    out["geomean"] = math.exp(sum(logs) / len(logs))
    out["ci95"] = [math.exp(lo), math.exp(hi)]
    return out


def before_after_table(rows: list[dict]) -> tuple[str, list[str], list[list[str]]]:
    """(sentence, headers, cells): the held-out shapes, pretrained model against RL-trained model."""
    s = before_after(rows)
    if s["geomean"] is None:
        sentence = (f"{len(rows)} held-out shapes; on none did both the pretrained and the RL-trained model keep a "
                    f"verified kernel (RL-trained only: {s['after_only']}, pretrained only: {s['before_only']}).")
    else:
        lo, hi = s["ci95"]
        sentence = (f"{len(rows)} held-out shapes, the same prompts to both models, best of k each. Where both kept a "
                    f"verified kernel ({s['shapes']} shapes), the RL-trained model's is {s['geomean']:.3f}x as fast as the "
                    f"pretrained model's in geomean (95% bootstrap interval over shapes {lo:.3f}-{hi:.3f}); only the "
                    f"RL-trained model kept one on {s['after_only']}, only the pretrained on {s['before_only']}.")
    headers = ["shape", "pretrained (best of k)", "vs strongest", "RL-trained (best of k)", "vs strongest", "after / before"]
    cells = [[r["key"], fmt(r["before_us"], 1) + " µs" if r["before_us"] else r["before_status"], fmt(r["before_vs_best"], 3),
              fmt(r["after_us"], 1) + " µs" if r["after_us"] else r["after_status"], fmt(r["after_vs_best"], 3),
              fmt(r["after_vs_before"], 3)] for r in rows]
    return sentence, headers, cells


def curve_keys(curves: list[dict]) -> dict[str, list[str]]:
    """Numeric curve columns, grouped by what they measure (reward, compile, correct, speedup)."""
    groups: dict[str, list[str]] = {"reward": [], "compile": [], "correct": [], "speedup": [], "verbatim": []}
    keys = sorted({k for row in curves for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    for k in keys:
        for g in groups:
            if g in k.lower() and k != "step":
                groups[g].append(k)
                break
    return {g: ks for g, ks in groups.items() if ks}


def heldout_curve_table(curve: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The held-out curve, a row per evaluation: reward, rates and speedup of the verified kernels."""
    keys = [k for k in ("reward", "parse_rate", "correct_rate", "faster_rate", "speedup_geomean", "speedup_max")
            if any(k in row for row in curve)]
    return ["step", *keys], [[str(row.get("step")), *(fmt(row.get(k), 3) for k in keys)] for row in curve]


def first_last_table(curves: list[dict], keys: list[str]) -> tuple[list[str], list[list[str]]]:
    """Mean of each column over the first and the last 20% of steps (the before/after view of a run)."""
    # ceil(20%), as training.grpo.compare_phases writes into metrics.json, so the two views agree
    span = max(1, math.ceil(len(curves) * 0.2))

    def mean(rows, k):
        xs = [r[k] for r in rows if isinstance(r.get(k), (int, float))]
        return sum(xs) / len(xs) if xs else None

    cells = [[k, fmt(mean(curves[:span], k), 3), fmt(mean(curves[-span:], k), 3)] for k in keys]
    return ["metric", f"first 20% ({span} steps)", f"last 20% ({span} steps)"], cells


def step_time_table(curves: list[dict]) -> tuple[list[str], list[list[str]]] | None:
    """Where an RL step's seconds went, in the mean over the logged steps: the whole step, the judging
    of its completions and the judge's phases (hgemm.entry.JUDGE_PHASES and EVAL_PHASES), each also as
    a share of the step. None where the curves have no step times."""
    def mean(k):
        xs = [r[k] for r in curves if isinstance(r.get(k), (int, float))]
        return sum(xs) / len(xs) if xs else None

    step = mean("step_seconds")
    if not step:
        return None
    phases = sorted({k for r in curves for k in r if k.startswith("judge_") and k.endswith("_seconds")
                     and k != "judge_seconds"})
    rows = [("the step", step), ("judging its completions", mean("judge_seconds"))]
    rows += [(" ".join(k[len("judge_"):-len("_seconds")].split("_")), mean(k)) for k in phases]
    return (["part", "seconds a step", "share of the step"],
            [[name, fmt(v, 2), fmt(v / step, 3)] for name, v in rows if v is not None])


def probe_table(probe: dict) -> tuple[str, list[str], list[list[str]]]:
    """The RL stage's before/after probe (training/probe.py): a sentence and a table of the rates and
    the best speedup, the starting model against the trained one on the same prompts."""
    change = probe["change"]
    sentence = (f"The same {probe['prompts']} prompts, {probe['k']} completions each, before and after training"
                + ("" if probe.get("timed") else " (no GPU: parse and compile only, nothing verified or timed)")
                + f". Problems with a verified kernel both times: {change['verified_both']}; only after: "
                f"{change['verified_after_only']}; only before: {change['verified_before_only']}.")
    rows = [[name.replace("_", " "), fmt(change[name]["before"], 3), fmt(change[name]["after"], 3)]
            for name in ("parse_rate", "compile_rate", "correct_rate")]
    if "best_speedup_geomean" in change:
        g = change["best_speedup_geomean"]
        rows.append([f"best speedup vs the strongest baseline, geomean over the {change['verified_both']} verified "
                     f"both times (rose on {change['best_speedup_rose']})", fmt(g["before"], 3), fmt(g["after"], 3)])
    return sentence, ["metric", "before RL", "after RL"], rows

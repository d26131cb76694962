"""Dispatch rules judged offline, leaving each tuned shape out in turn, on what the tunes measured.

A tune times a shortlist of kernels on every shape (bench.json). Leave shape s out: a rule picks a
kernel for s from the other shapes' data, and since the tune timed many kernels on s, the pick's time
on s is often known; its ratio to the winner's time (s's fastest verified kernel) says how much the
rule loses. A pick the tune did not time on s counts as unmeasured (the share is reported), so rules
are compared on the shapes where all of them are measured. It costs no GPU time, and it is how a rule
earns a GPU check on shapes no tune saw (`hgemm bench --library A --library B`).

Rules (each picks among the kernels that won some other shape, or for cost that another shape
offers, and that fit s: layout, TMA row pitch):
- nearest: the kernel of the nearest tuned shape of the same layout in (log M, log N, log K, log
  batch), hgemm.library's `nearest` dispatch;
- nearest_aligned: the same distance plus a penalty for each way the two shapes differ in alignment:
  A's rows 16-byte aligned (TMA's condition), B's rows, every row a 128-byte multiple;
- measured: every kernel that won another shape, scored by its measured slowdown against the winner
  on the 8 nearest shapes (alignment-aware distance, weighted by 1 / (1 + distance); a shape whose
  tune did not time it counts as UNTIMED_SLOWDOWN); the lowest score wins: hgemm.library's `measured`
  dispatch (hgemm.library.measured_pick);
- cost: every kernel another shape offers (its winner and runners-up, hgemm.library.offered), ranked by
  hgemm.cost's model fitted to the other shapes' measurements and corrected by the 8 nearest shapes'
  (hgemm.library's `cost` dispatch).

A rule may pick a kernel the left-out shape's tune never timed (the cost rule often does: it ranks
kernels the shortlist left out), so each rule is also judged choosing among the kernels that were
timed there (`timed_only`): every pick is then measured, and the rules are compared on all shapes.

The cost rule's whole ranking is judged too (`cost_best_of`): the best of its first k kernels that the
left-out shape's tune timed, against its first pick. That is what a best of k over the configurations
the library already ranks can gain over the library's choice, the ceiling of a sampler (the model's
best of k) that writes out the library's own kernels.

The cost model is also judged on GPU runs of shapes no tune saw (`--held-out RUN ...`, bench JSONs):
fitted to every tuned shape and corrected by each run shape's nearest tuned shapes, as the library's
dispatch is, it ranks the verified seed-family kernels a run timed on one shape; over every pair of them
more than MARGIN apart, how often it ranks the faster one first, and over the shapes its first choice's
time against the fastest's.

    python -m hgemm.dispatch_eval benchmarks/tune benchmarks/sample_tune --out benchmarks/dispatch/loo.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .candidate import Candidate, parse_candidate
from .cost import CostModel, family_text, kernel_params
from .files import read_user_text, write_report
from .library import (NEIGHBOURS, Library, aligned_distance, log_distance, measured_pick, merge_libraries, offered,
                      tma_compatible, tune_results)
from .problem import Problem
from .summary import BESIDE, geomean

RULES = ("nearest", "nearest_aligned", "measured", "cost")
BEST_OF = (1, 2, 4, 8)  # best_of_cost: the cost rule's first k kernels measured (1: its pick)
MARGIN = 1.02  # faster than the first pick by more than this: the library stage's own_margin in default.yaml


@dataclass(frozen=True)
class Shape:
    problem: Problem
    winner: str
    times: dict[str, float]  # kernel name -> measured µs on this shape (verified only)


def load_shapes(folders: list[str | Path]) -> tuple[list[Shape], dict[str, Path]]:
    """Every tuned shape of the folders with the kernels timed on it, and where each winner's text is.
    A kernel timed as `beside:<name>` is that kernel's measurement; a shape two folders tuned keeps the
    measurements of the one whose winner has the higher speedup over its run's strongest baseline, as
    a merge of the folders keeps its entry (hgemm.library.merge_libraries)."""
    shapes: dict[str, tuple[float, Shape]] = {}
    texts: dict[str, Path] = {}
    for folder in map(Path, folders):
        table = json.loads((folder / "table.json").read_text())
        results = tune_results(folder)
        if results is None:
            raise FileNotFoundError(f"{folder}: no bench.json or bench.json.gz: the rules need what the tune timed")
        for pr in results["problems"]:
            problem = Problem.from_dict(pr["problem"])
            entry = table["entries"].get(problem.key)
            if entry is None:
                continue
            speedup = entry.get("speedup_vs_best") or 0
            if problem.key in shapes and speedup <= shapes[problem.key][0]:
                continue
            times = {n.removeprefix(BESIDE): r["time_us"] for n, r in pr["candidates"].items()
                     if r.get("status") == "ok" and r.get("time_us")}
            shapes[problem.key] = (speedup, Shape(problem, entry["kernel"], times))
            texts.setdefault(entry["kernel"], folder / "kernels" / f"{entry['kernel']}.cu")
    return [shape for _, shape in shapes.values()], texts


class Rules:
    """The rules over one set of tuned shapes; `pick(rule, shape)` leaves that shape out."""

    def __init__(self, shapes: list[Shape], texts: dict[str, Path]):
        self.shapes = shapes
        self.texts = texts
        self._candidates: dict[str, Candidate] = {}
        self._fits: dict[tuple[str, str], bool] = {}
        self._wins = Counter(s.winner for s in shapes)
        self._offers = {s.problem.key: offered(s.winner, {n: t / s.times[s.winner] for n, t in s.times.items()}
                                               if s.winner in s.times else {}) for s in shapes}
        self._offered = Counter(n for names in self._offers.values() for n in names)
        self._cost_for: str | None = None
        self._cost: CostModel | None = None

    def fits(self, name: str, p: Problem) -> bool:
        key = (name, p.key)
        if key not in self._fits:
            if name not in self._candidates:  # a winner's stored text, or a runner-up's family render
                text = self.texts[name].read_text() if name in self.texts else family_text(name)
                self._candidates[name] = parse_candidate(text)
            cand = self._candidates[name]
            self._fits[key] = cand.supports(p.layout) and tma_compatible(cand, p)
        return self._fits[key]

    def _others(self, shape: Shape, distance) -> list[tuple[float, Shape]]:
        p = shape.problem
        return sorted(((distance(p, o.problem), o) for o in self.shapes
                       if o.problem.key != p.key and o.problem.layout == p.layout),
                      key=lambda dk: (dk[0], dk[1].problem.key))

    def pick(self, rule: str, shape: Shape, timed_only: bool = False) -> str | None:
        """The rule's kernel for the shape, from the other shapes' data; timed_only: among the kernels
        the shape's tune timed."""
        if rule not in RULES:
            raise ValueError(f"unknown rule {rule!r}; rules: {', '.join(RULES)}")
        p = shape.problem
        if rule in ("nearest", "nearest_aligned"):
            distance = log_distance if rule == "nearest" else aligned_distance
            for _, other in self._others(shape, distance):
                if self.fits(other.winner, p) and (not timed_only or other.winner in shape.times):
                    return other.winner
            return None
        if rule == "measured":
            near = self._others(shape, aligned_distance)[:NEIGHBOURS]
            # kernels that won some other shape (the left-out shape's own winner only if it won another too)
            names = dict.fromkeys(n for _, o in near for n in o.times if self._wins[n] > (n == shape.winner)
                                  and (not timed_only or n in shape.times))
            ratios = [(d, {n: t / o.times[o.winner] for n, t in o.times.items()}) for d, o in near]
            return measured_pick(ratios, names, lambda n: self.fits(n, p))
        if rule == "cost":
            ranked = self.cost_ranking(shape, timed_only)
            return ranked[0] if ranked else None
        raise AssertionError(rule)

    def cost_ranking(self, shape: Shape, timed_only: bool = False) -> list[str]:
        """The cost rule's candidates for the shape, fastest estimate first (the rule picks the first)."""
        p = shape.problem
        near = [(d, o.problem.key) for d, o in self._others(shape, aligned_distance)[:NEIGHBOURS]]
        own = self._offers[p.key]  # what only the left-out shape offers is not in the library without it
        names = [n for n in self._offered if self._offered[n] > (n in own) and self.fits(n, p)
                 and (not timed_only or n in shape.times)]
        return self._cost_model(shape).rank(names, p, near)

    def _cost_model(self, shape: Shape) -> CostModel:
        """The cost model fitted without the shape's measurements."""
        if self._cost_for != shape.problem.key:
            self._cost = CostModel({o.problem.key: o.times for o in self.shapes if o.problem.key != shape.problem.key})
            self._cost_for = shape.problem.key
        return self._cost


def best_of_cost(judge: Rules, shape: Shape, ks=BEST_OF) -> dict | None:
    """What measuring the cost rule's first k kernels on the shape (left out) would gain over its first
    pick, among the kernels its tune timed: per k, the best of them over the first pick's time."""
    ranked = judge.cost_ranking(shape, timed_only=True)
    if not ranked:
        return None
    times = [shape.times[n] for n in ranked]
    return {"ranked": len(ranked), "first_slowdown": times[0] / shape.times[shape.winner],
            "best_of": {k: min(times[:k]) / times[0] for k in ks}}


def best_of_summary(rows: list[dict], margin: float = MARGIN) -> dict:
    """Over best_of_cost's rows, per k: the best of k's time over the winner's (geomean), its gain over
    the first pick, and the shapes where it is more than `margin` faster than the first pick. The
    headroom of a best of k that writes out configurations the library already ranks (a model's
    samples, say) over the library's own choice."""
    summary = {}
    for k in rows[0]["best_of"] if rows else ():
        gain = [r["best_of"][k] for r in rows]
        summary[k] = {"geomean_slowdown": geomean([r["first_slowdown"] * g for r, g in zip(rows, gain)]),
                      "geomean_gain": 1 / geomean(gain),
                      "shapes_faster_than_first": sum(g * margin < 1 for g in gain)}
    ranked = sorted(r["ranked"] for r in rows)
    return {"shapes": len(rows), "margin": margin, "median_ranked": ranked[len(ranked) // 2] if ranked else 0,
            "summary": summary}


def _summary(rows: list[dict], rules: tuple[str, ...], mode: str) -> tuple[int, dict]:
    common = [r for r in rows if all(r[mode][rule]["slowdown"] for rule in rules)]
    summary = {}
    for rule in rules:
        slow = [r[mode][rule]["slowdown"] for r in common]
        summary[rule] = {"measured_share": sum(1 for r in rows if r[mode][rule]["slowdown"]) / len(rows) if rows else 0,
                         "geomean_slowdown": geomean(slow), "worst_slowdown": max(slow) if slow else None,
                         "within_5pct": sum(s <= 1.05 for s in slow), "picks_winner": sum(s <= 1.0 for s in slow)}
    return len(common), summary


def evaluate(shapes: list[Shape], texts: dict[str, Path], rules: tuple[str, ...] = RULES) -> dict:
    """Per shape each rule's pick and its time over the winner's, choosing among every kernel (`any`)
    and among those the shape's tune timed (`timed_only`); per rule and mode the summary over the
    shapes where every rule's pick was measured."""
    judge = Rules(shapes, texts)
    rows = []
    for shape in shapes:
        row = {"shape": shape.problem.key, "winner": shape.winner}
        for mode in ("any", "timed_only"):
            row[mode] = {}
            for rule in rules:
                name = judge.pick(rule, shape, timed_only=mode == "timed_only")
                t = shape.times.get(name) if name else None
                row[mode][rule] = {"kernel": name, "slowdown": t / shape.times[shape.winner] if t else None}
        if "cost" in rules:
            row["cost_best_of"] = best_of_cost(judge, shape)
        rows.append(row)
    out = {"shapes": len(rows)}
    for mode in ("any", "timed_only"):
        compared, summary = _summary(rows, rules, mode)
        out[mode] = {"compared_on": compared, "summary": summary}
    out["rows"] = rows
    if "cost" in rules:
        out["cost_best_of"] = best_of_summary([r["cost_best_of"] for r in rows if r["cost_best_of"]])
    return out


def held_out_pairs(library: Library, runs: list[str | Path], margin: float = MARGIN) -> dict:
    """The library's cost model on GPU runs of shapes no tune saw: per shape, the verified seed-family
    kernels the run timed (a kernel timed under two libraries' names counts once, at its faster time);
    over every pair more than `margin` apart, whether the model ranks the faster first; over the shapes,
    the time of its first choice among them over the fastest's."""
    model, pairs, agree, first = library.cost_model(), 0, 0, []
    for run in runs:
        for pr in json.loads(read_user_text(run, "bench results"))["problems"]:
            p = Problem.from_dict(pr["problem"])
            times: dict[str, float] = {}
            for name, r in pr["candidates"].items():
                base = name.split(":", 1)[-1]
                if r.get("status") == "ok" and r.get("time_us") and kernel_params(base) is not None:
                    times[base] = min(times.get(base, math.inf), r["time_us"])
            near = library.neighbours(p)
            est = {n: e for n in times if (e := model.log_estimate(n, p, near)) is not None}
            for a, b in itertools.combinations(est, 2):
                if max(times[a], times[b]) > margin * min(times[a], times[b]):
                    pairs += 1
                    agree += (times[a] < times[b]) == (est[a] < est[b])
            if est:
                first.append(times[min(est, key=est.get)] / min(times[n] for n in est))
    return {"runs": [str(r) for r in runs], "margin": margin, "pairs": pairs, "faster_ranked_first": agree,
            "shapes": len(first), "first_choice_over_fastest": geomean(first)}


def markdown(result: dict) -> str:
    lines = ["# Dispatch rules, each tuned shape left out in turn", "",
             f"{result['shapes']} tuned shapes. Slowdown: the pick's time over the shape's winner's, where the "
             "left-out shape's tune timed the pick."]
    titles = {"any": "Choosing among every kernel that won another shape (cost: that another shape offers, its "
                     "runners-up too); compared on the {n} shapes where every rule's pick was timed",
              "timed_only": "Choosing among the kernels the left-out shape's tune timed (every pick measured); "
                            "compared on the {n} shapes where every rule has a pick"}
    for mode, title in titles.items():
        lines += ["", f"## {title.format(n=result[mode]['compared_on'])}", "",
                  "| rule | pick timed | geomean slowdown | worst | within 5% | the winner itself |",
                  "|---|---:|---:|---:|---:|---:|"]
        for rule, s in result[mode]["summary"].items():
            lines.append(f"| {rule} | {s['measured_share']:.0%} | {s['geomean_slowdown'] or float('nan'):.3f} | "
                         f"{s['worst_slowdown'] or float('nan'):.2f} | {s['within_5pct']} | {s['picks_winner']} |")
    best_of = result.get("cost_best_of")
    if best_of and best_of["shapes"]:
        lines += ["", f"## The cost rule's first k kernels measured, best of them ({best_of['shapes']} shapes)", "",
                  "Among the kernels the left-out shape's tune timed (a median of "
                  f"{best_of['median_ranked']} a shape): the headroom a best of k over configurations the library "
                  "ranks has over its first pick.", "",
                  "| k | geomean slowdown vs the winner | gain over the first pick | shapes faster than it "
                  f"by more than {best_of['margin'] - 1:.0%} |", "|---:|---:|---:|---:|"]
        lines += [f"| {k} | {s['geomean_slowdown']:.3f} | {s['geomean_gain']:.3f} | {s['shapes_faster_than_first']} |"
                  for k, s in best_of["summary"].items()]
    held = result.get("held_out_pairs")
    if held:
        lines += ["", "## The cost model on GPU runs of shapes no tune saw", "",
                  f"Runs: {', '.join(f'`{r}`' for r in held['runs'])}. Of the {held['pairs']} pairs of verified "
                  f"seed-family kernels more than {held['margin'] - 1:.0%} apart that a run timed on one shape, "
                  f"the model ranks the faster first on {held['faster_ranked_first']}; its first choice among "
                  f"each shape's timed kernels takes {held['first_choice_over_fastest'] or float('nan'):.3f}x "
                  f"the fastest's time in geomean ({held['shapes']} shapes)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.dispatch_eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("libraries", nargs="+", help="tune folders (table.json, kernels/, bench.json[.gz])")
    ap.add_argument("--out", required=True, help="results JSON (a Markdown summary goes beside it)")
    ap.add_argument("--held-out", nargs="+", default=[], metavar="RUN",
                    help="bench JSONs (.json or .json.gz) of shapes no tune saw: the cost model judged on them")
    args = ap.parse_args(argv)
    try:
        shapes, texts = load_shapes(args.libraries)
        result = evaluate(shapes, texts)
        if args.held_out:
            with tempfile.TemporaryDirectory() as merged:
                merge_libraries(args.libraries, merged)
                result["held_out_pairs"] = held_out_pairs(Library(merged), args.held_out)
    except (OSError, KeyError, ValueError) as e:  # ValueError: bad JSON, a file that is not gzip
        print(f"error: {e}", file=sys.stderr)
        return 2
    result["libraries"] = args.libraries
    write_report(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

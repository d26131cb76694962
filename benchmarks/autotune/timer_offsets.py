"""How far the first-call search's own times are from the harness's, by kind of kernel.

    python benchmarks/autotune/timer_offsets.py PIN_LOG BENCH_JSON[.gz] [LIBRARY]

PIN_LOG is `hgemm pin --autotune` output (per shape the kept kernel and the rule's pick, each in the
search's µs), BENCH_JSON the `hgemm bench` run that timed the pinned library (candidates
`LIBRARY:<kernel>`, default `autotuned`) and the library it was pinned from (`pipeline_library:<kernel>`)
beside the baselines. For each kernel whose time both report, the harness's median minus the search's,
grouped by family (wgmma split by form: split-K, stream-K, staged), then the shapes where the rule's pick,
which the search timed slower than its keep, ran more than 2% faster in the harness: the search's
order reversed.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^(\S+): (\S+) ([\d.]+) us, the rule's pick (\S+) ([\d.]+) us", re.M)


def kind(name: str) -> str:
    if not name.startswith("wgmma"):
        return re.sub(r"_(w|k|nb|m|t)\d.*$", "", name)
    form = "stream-K" if "_stk" in name else "split-K" if "_sk" in name else "whole tile"
    return f"wgmma {form}" + (", staged" if "staged" in name else "")


def harness_us(problem: dict, name: str, libraries: tuple[str, ...]) -> float | None:
    for lib in libraries:
        r = problem["candidates"].get(f"{lib}:{name}", {})
        if r.get("status") == "ok":
            return r["timing"]["median_us"]
    return None


def main(pin_log: str, bench: str, library: str = "autotuned") -> None:
    opener = gzip.open if bench.endswith(".gz") else open
    with opener(bench, "rt") as f:
        problems = {}
        for p in json.load(f)["problems"]:
            q = p["problem"]
            problems[f"b{q['batch']}_m{q['M']}_n{q['N']}_k{q['K']}_{q['layout']}"] = p
    libraries = (library, "pipeline_library")
    offsets, reversed_ = defaultdict(list), []
    with open(pin_log) as f:
        for key, kept, kept_us, rule, rule_us in LINE.findall(f.read()):
            if key not in problems:
                continue
            got = {}
            for name, search_us in ((kept, float(kept_us)), (rule, float(rule_us))):
                h = harness_us(problems[key], name, libraries)
                if h is not None and name not in got:
                    got[name] = h
                    offsets[kind(name)].append(h - search_us)
            if kept != rule and kept in got and rule in got and got[rule] < 0.98 * got[kept]:
                reversed_.append(f"{key}: kept {kept} {got[kept]:.1f} us, the rule's pick {rule} {got[rule]:.1f} us")
    print("| kernel kind | n | harness - search µs, median | min | max |")
    print("|---|---:|---:|---:|---:|")
    for k, v in sorted(offsets.items()):
        print(f"| {k} | {len(v)} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
    print(f"\nshapes where the harness ran the rule's pick more than 2% faster than the kept kernel: {len(reversed_)}")
    for line in reversed_:
        print(f"- {line}")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Header renders against the raw-CUDA renders they replace: the same kernels, proven without a GPU.

For every variant of a seed family and every layout its spec lists, compiles the render of the family
module at a git revision (the raw-CUDA text) and the render of the current module (the short text over
hgemm/include), each cold with the harness's nvcc flags, and compares

  (a) the ptxas report: registers, static shared memory, spills, stack frame, barriers;
  (b) the SASS (cuobjdump -sass) of the entry, with addresses, encodings and symbol names taken out
      and branch targets made relative ("identical"), and the raw instruction words as well
      ("encoding_identical": the same bits, scheduling control included).

It also records the cold compile time of each (wall and CPU seconds of one nvcc process) and the token
length of both texts. The results are JSON plus a short markdown summary:

    python -m benchmarks.header_equivalence --family wgmma --old-rev main -j 2 \
        --out benchmarks/headers/equivalence_wgmma.json

--old-path DIR takes the old family package from a folder instead of a revision (a copy of
kernels_corpus/families/). --old-headers compiles the old renders against hgemm/include as it was at
--old-rev too, which judges a change of the headers themselves (with --only to leave out variants the
old revision did not have):

    python -m benchmarks.header_equivalence --family wgmma --old-rev REV --old-headers --only '^(?!.*_stk)' \
        --out FILE.json --tokenizer DIR counts tokens with a trained tokenizer (stages.tokenizer's
output); GPT-2 byte-level pre-tokens (kernels_corpus.build.token_counter, a lower bound on any
byte-level BPE) and bytes (an upper bound) are recorded as well.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hgemm.candidate import parse_candidate
from hgemm.compile import BASE_FLAGS, find_cuda_tool, find_nvcc, gencode, parse_ptxas_report
from hgemm.envinfo import environment
from kernels_corpus.build import token_counter

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "hgemm" / "include"
FAMILIES_DIR = "kernels_corpus/families"
ARCH = "sm_90a"

_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
_WORD = re.compile(r"^\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# opcodes whose last operand is a code address
_BRANCHES = ("BRA", "BSSY", "BRX", "CALL", "JMP", "JMX", "RET", "BREAK", "BPT", "SSY", "PBK", "CAL", "WARPSYNC")
_TARGET = re.compile(r"(0x[0-9a-f]+)\s*$")
_SYMBOL = re.compile(r"\b_Z\w+|\$[\w$.]+")


def load_old_families(rev: str | None, path: str | None, family: str, scratch: Path):
    """The family module as it was: kernels_corpus/families/ at `rev` (or the folder `path`) imported as
    a package of its own, so its relative imports resolve to its own siblings."""
    pkg = scratch / "old_families"
    pkg.mkdir(parents=True, exist_ok=True)
    if path:
        for f in Path(path).glob("*.py"):
            (pkg / f.name).write_text(f.read_text())
    else:
        names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:{FAMILIES_DIR}"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout.split()
        for name in names:
            if name.endswith(".py"):
                text = subprocess.run(["git", "show", f"{rev}:{FAMILIES_DIR}/{name}"], cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout
                (pkg / name).write_text(text)
    sys.path.insert(0, str(scratch))
    try:
        return importlib.import_module(f"old_families.{family}")
    finally:
        sys.path.remove(str(scratch))


def old_headers(rev: str, scratch: Path) -> Path:
    """hgemm/include as it was at `rev`, extracted under scratch; the folder to pass as -I."""
    archive = subprocess.run(["git", "archive", rev, "hgemm/include"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    return scratch / "hgemm" / "include"


def compile_cold(text: str, entry: str, layout: str, workdir: Path, include: Path = INCLUDE) -> dict:
    """One cold nvcc run with the harness's flags (hgemm.compile) plus the include directory: the
    cubin path, the ptxas resources, wall and CPU seconds of the nvcc process tree."""
    workdir.mkdir(parents=True, exist_ok=True)
    src, cubin = workdir / "kernel.cu", workdir / "kernel.cubin"
    src.write_text(text)
    flags = [*BASE_FLAGS, gencode(ARCH), "-Xptxas", "-v", "-I", str(include)]
    if layout == "TN":
        flags.append("-DHGEMM_LAYOUT_TN")
    log_path = workdir / "nvcc.log"
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([find_nvcc(), "-cubin", *flags, "-o", str(cubin), str(src)], cwd=workdir,
                                stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)   # the rusage of nvcc and the tools it waited for
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    log = log_path.read_text()
    res = parse_ptxas_report(log, entry) if proc.returncode == 0 else None
    return {"ok": res is not None, "cubin": str(cubin), "log": log[-4000:], "resources": res.__dict__ if res else None,
            "wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3), "flags": flags}


def sass(cubin: str, entry: str) -> list[tuple[str, str, str]]:
    """(normalised instruction, first word, second word) for each instruction of `entry`."""
    out = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", cubin], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    rows, current, pending = [], None, None
    for line in out:
        m = _FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        if current != entry:
            continue
        m = _INSN.match(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2), m.group(3))
            continue
        m = _WORD.match(line)
        if m and pending:
            addr, text, w0 = pending
            rows.append((_normalise(addr, text), w0, m.group(1)))
            pending = None
    return rows


def _normalise(addr: int, text: str) -> str:
    text = _SYMBOL.sub("<sym>", re.sub(r"\s+", " ", text).strip())
    opcode = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0].split(".")[0]
    if opcode in _BRANCHES:
        text = _TARGET.sub(lambda m: f"L{(int(m.group(1), 16) - addr) // 16:+d}", text)
    return text


def _opcodes(rows) -> collections.Counter:
    return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split(" ")[0] for t, _, _ in rows)


def compare(old: dict, new: dict, entry: str) -> dict:
    """The ptxas and SASS comparison of two compiles of one entry."""
    a, b = sass(old["cubin"], entry), sass(new["cubin"], entry)
    ra, rb = old["resources"], new["resources"]
    keys = ("registers", "smem_static", "spill_stores", "spill_loads", "stack_frame", "barriers")
    row = {
        "identical": [t for t, _, _ in a] == [t for t, _, _ in b],
        "encoding_identical": [(w0, w1) for _, w0, w1 in a] == [(w0, w1) for _, w0, w1 in b],
        "resources_identical": all(ra[k] == rb[k] for k in keys),
        "instructions_old": len(a), "instructions_new": len(b),
    }
    if not row["identical"]:
        oa, ob = _opcodes(a), _opcodes(b)
        row["same_opcode_mix"] = oa == ob
        row["opcodes_only_old"] = dict(oa - ob)
        row["opcodes_only_new"] = dict(ob - oa)
        ta, tb = [t for t, _, _ in a], [t for t, _, _ in b]
        hunks = [h for h in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes() if h[0] != "equal"]
        row["unmatched_lines"] = [sum(i2 - i1 for _, i1, i2, _, _ in hunks), sum(j2 - j1 for _, _, _, j1, j2 in hunks)]
        row["diff"] = [{"old": ta[i1:i2][:6], "new": tb[j1:j2][:6]} for _, i1, i2, j1, j2 in hunks[:20]]
    return row


def run_one(job: dict, scratch: Path) -> dict:
    name, layout = job["name"], job["layout"]
    work = scratch / f"{name}_{layout}_{abs(hash(job['old_source']))}"
    old = compile_cold(job["old_text"], name, layout, work / "old", job.get("old_include", INCLUDE))
    new = compile_cold(job["new_text"], name, layout, work / "new")
    row = {"variant": name, "layout": layout, "old_source": job["old_source"], "compiled_old": old["ok"],
           "compiled_new": new["ok"]}
    if old["ok"] and new["ok"]:
        row |= compare(old, new, name)
    else:
        row |= {"identical": False, "error_old": "" if old["ok"] else old["log"], "error_new": "" if new["ok"] else new["log"]}
    for side, c in (("old", old), ("new", new)):
        res = c["resources"] or {}
        row |= {f"regs_{side}": res.get("registers"), f"smem_static_{side}": res.get("smem_static"),
                f"spills_{side}": (res.get("spill_stores", 0) + res.get("spill_loads", 0)) if res else None,
                f"compile_wall_s_{side}": c["wall_s"], f"compile_cpu_s_{side}": c["cpu_s"]}
    return row


def summary_markdown(result: dict) -> str:
    rows = result["rows"]
    same = sum(r["identical"] for r in rows)
    bits = sum(r.get("encoding_identical", False) for r in rows)
    regs = sum(r.get("resources_identical", False) for r in rows)
    walls = [r["compile_wall_s_new"] for r in rows]
    cpus = [r["compile_cpu_s_new"] for r in rows]
    old_walls = [r["compile_wall_s_old"] for r in rows]
    toks = result["tokens"]
    # against the renders of another revision's family module: its raw-CUDA texts, or (old_headers) its
    # header renders compiled against its own headers
    old, new = ("old", "new") if result.get("old_headers") else ("raw", "header")
    title = (f"the renders and headers at `{result['old']}`" if result.get("old_headers") else "raw-CUDA renders")
    lines = [
        f"# Header renders against {title}: {result['family']}",
        "",
        f"`{result['command']}`; nvcc {result['env']['nvcc']}, `{' '.join(result['flags'])}` "
        f"(+ `-DHGEMM_LAYOUT_TN` for TN), old render from `{result['old']}`"
        + (", compiled against its headers." if result.get("old_headers") else "."),
        "",
        f"- SASS identical (addresses, encodings and symbols normalised): **{same} of {len(rows)}** instantiations "
        f"({len(result['variants'])} variants x their layouts); the same instruction words, scheduling control "
        f"bits included: {bits} of {len(rows)}.",
        f"- ptxas resources (registers, static smem, spills, stack, barriers) identical: {regs} of {len(rows)}; "
        f"spills in the header renders: {sum(bool(r['spills_new']) for r in rows)}.",
        f"- Cold compile of one instantiation (one nvcc process, {result['jobs']} at a time on "
        f"{result['cpus']} cores): {new} render {min(walls):.2f}-{max(walls):.2f} s wall, "
        f"{min(cpus):.2f}-{max(cpus):.2f} s CPU; {old} render {min(old_walls):.2f}-{max(old_walls):.2f} s wall.",
        f"- Render length ({result['token_unit']}): {old} {toks['old_min']}-{toks['old_max']}, {new} "
        f"{toks['new_min']}-{toks['new_max']}; at most {toks['old_pretokens_max']} and {toks['new_pretokens_max']} "
        f"GPT-2 pre-tokens, {toks['old_bytes_max']} and {toks['new_bytes_max']} bytes.",
    ]
    specs = sum(t["spec_identical"] for t in result["per_variant_tokens"].values())
    lines.append(f"- Launch specs identical (entry, block, grid, smem, workspace, layouts, tensor maps): {specs} of "
                 f"{len(result['per_variant_tokens'])} variants.")
    lib = result["library_rows"]
    if lib:
        lines.append(f"- The kernel library `{result['library']}`: its stored texts of this family (the raw renders it was "
                     f"tuned with) against the header renders of the same names: "
                     f"{sum(r['identical'] for r in lib)} of {len(lib)} identical.")
    if result["variants_differ"]:
        lines.append(f"- The variant lists differ: {result['variants_differ']}")
    differing = [r for r in rows + lib if not r["identical"]]
    if differing:
        lines += ["", "## Instantiations whose SASS differs", "",
                  "Opcodes only in one of the two, and the lines a diff leaves unmatched (old/new); the JSON's `diff` "
                  "holds the first hunks.", "",
                  "| variant | layout | old text | regs old/new | instructions old/new | only old | only new | unmatched |",
                  "|---|---|---|---|---|---|---|---|"]
        fmt = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "-"
        lines += [f"| {r['variant']} | {r['layout']} | {r['old_source']} | {r['regs_old']}/{r['regs_new']} | "
                  f"{r.get('instructions_old')}/{r.get('instructions_new')} | {fmt(r.get('opcodes_only_old', {}))} | "
                  f"{fmt(r.get('opcodes_only_new', {}))} | {'/'.join(map(str, r.get('unmatched_lines', [])))} |"
                  for r in differing]
    lines += ["", "## Per variant", "", "| variant | layout | SASS | regs old/new | compile s old/new | tokens old/new |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        t = result["per_variant_tokens"][r["variant"]]
        lines.append(f"| {r['variant']} | {r['layout']} | {'identical' if r['identical'] else 'differs'} | "
                     f"{r['regs_old']}/{r['regs_new']} | {r['compile_wall_s_old']:.2f}/{r['compile_wall_s_new']:.2f} | "
                     f"{t['old']}/{t['new']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", required=True, help="a module of kernels_corpus/families, e.g. wgmma")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--old-rev", default="main", help="git revision holding the raw-CUDA family (default main)")
    src.add_argument("--old-path", help="a folder holding the old kernels_corpus/families/*.py instead")
    ap.add_argument("--old-headers", action="store_true",
                    help="compile the old renders against hgemm/include at --old-rev (a change of the headers)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="compiles at a time")
    ap.add_argument("--tokenizer", default=None, help="a trained tokenizer folder (default: GPT-2 pre-tokens)")
    ap.add_argument("--only", default=None, help="a regex: only variants whose names match")
    ap.add_argument("--extra", action="append", default=[],
                    help="a module attribute holding more parameter dicts to check (e.g. EPILOGUE_SMEM_PROBE)")
    ap.add_argument("--library", default=None,
                    help="a kernel library folder (e.g. benchmarks/tune): its stored kernels/<name>.cu of this "
                         "family against the header render of the same name as well")
    ap.add_argument("--out", required=True, help="the JSON results; the markdown summary goes beside it (.md)")
    args = ap.parse_args()
    if find_nvcc() is None or find_cuda_tool("cuobjdump") is None:
        sys.exit("needs nvcc and cuobjdump (the CUDA toolkit, or pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump)")

    new_fam = importlib.import_module(f"kernels_corpus.families.{args.family}")
    count, unit = token_counter(args.tokenizer)
    count_pre, pre_unit = token_counter(None)
    with tempfile.TemporaryDirectory(prefix="hgemm-equiv-") as tmp:
        scratch = Path(tmp)
        old_fam = load_old_families(None if args.old_path else args.old_rev, args.old_path, args.family, scratch)
        if args.old_headers and args.old_path:
            sys.exit("--old-headers takes the headers at --old-rev, not beside --old-path")
        old_include = old_headers(args.old_rev, scratch) if args.old_headers else INCLUDE
        variants = new_fam.variants()
        names = {new_fam.name(p) for p in variants}
        for attr in args.extra:
            for p in getattr(new_fam, attr):
                if new_fam.name(p) not in names:
                    variants.append(p)
                    names.add(new_fam.name(p))
        if args.only:
            variants = [p for p in variants if re.search(args.only, new_fam.name(p))]
        old_names, new_names = [old_fam.name(p) for p in old_fam.variants()], [new_fam.name(p) for p in new_fam.variants()]
        differ = "" if old_names == new_names else f"only old: {sorted(set(old_names) - set(new_names))}, only new: {sorted(set(new_names) - set(old_names))}"
        jobs, tokens = [], {}
        for p in variants:
            name = new_fam.name(p)
            old_text, new_text = old_fam.render(p), new_fam.render(p)
            old_spec, new_spec = parse_candidate(old_text).spec, parse_candidate(new_text).spec
            tokens[name] = {"old": count(old_text), "new": count(new_text),
                            "old_pretokens": count_pre(old_text), "new_pretokens": count_pre(new_text),
                            "old_bytes": len(old_text.encode()), "new_bytes": len(new_text.encode()),
                            "spec_identical": old_spec == new_spec}
            for layout in new_spec.layouts:
                jobs.append({"name": name, "layout": layout, "old_text": old_text, "new_text": new_text,
                             "old_source": f"render at {args.old_path or args.old_rev}", "old_include": old_include})
        if args.library:
            by_name = {new_fam.name(p): p for p in variants}
            for f in sorted(Path(args.library, "kernels").glob("*.cu")):
                if f.stem in by_name:
                    new_text = new_fam.render(by_name[f.stem])
                    for layout in parse_candidate(new_text).spec.layouts:
                        jobs.append({"name": f.stem, "layout": layout, "old_text": f.read_text(), "new_text": new_text,
                                     "old_source": str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f)})
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda j: run_one(j, scratch), jobs))
        elapsed = time.perf_counter() - t0
    library_rows = [r for r in rows if not r["old_source"].startswith("render at")]
    rows = [r for r in rows if r["old_source"].startswith("render at")]
    for r in rows:
        r |= {"tokens_old": tokens[r["variant"]]["old"], "tokens_new": tokens[r["variant"]]["new"],
              "spec_identical": tokens[r["variant"]]["spec_identical"]}
    tok = {"old_min": min(t["old"] for t in tokens.values()), "old_max": max(t["old"] for t in tokens.values()),
           "new_min": min(t["new"] for t in tokens.values()), "new_max": max(t["new"] for t in tokens.values()),
           "old_bytes_max": max(t["old_bytes"] for t in tokens.values()),
           "new_bytes_max": max(t["new_bytes"] for t in tokens.values()),
           "old_pretokens_max": max(t["old_pretokens"] for t in tokens.values()),
           "new_pretokens_max": max(t["new_pretokens"] for t in tokens.values())}
    result = {"command": "python -m benchmarks.header_equivalence " + " ".join(sys.argv[1:]), "family": args.family,
              "old": args.old_path or args.old_rev, "old_headers": args.old_headers, "jobs": args.jobs, "cpus": os.cpu_count(),
              "flags": [*BASE_FLAGS, gencode(ARCH), "-Xptxas", "-v", "-I", "hgemm/include"], "token_unit": unit,
              "pretoken_unit": pre_unit,
              "env": environment(None), "seconds": round(elapsed, 1), "variants": [new_fam.name(p) for p in variants],
              "variants_differ": differ, "tokens": tok, "per_variant_tokens": tokens, "rows": rows,
              "identical": sum(r["identical"] for r in rows), "instantiations": len(rows),
              "library": args.library, "library_rows": library_rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(summary_markdown(result))
    print(f"{result['identical']} of {len(rows)} instantiations identical"
          + (f"; library kernels: {sum(r['identical'] for r in library_rows)} of {len(library_rows)}" if library_rows else "")
          + f"; {out}")


if __name__ == "__main__":
    main()

"""Header renders against the renders of a git ref: the same machine code for every instantiation?

For each variant of a family and each layout it supports, the family's render at REF (Python holding
the CUDA) and the render of this checkout (an include and one entry instantiating a header template)
are compiled the way the harness compiles candidates (hgemm.compile.compile_candidate: its flags, the
include path, -DHGEMM_LAYOUT_TN, a cold cache), and compared: ptxas registers, shared memory, spills,
and the SASS (`cuobjdump -sass`, with addresses, encodings and mangled names normalised). Where the
SASS differs, the PTX of both is compared with virtual registers renumbered by first use, which tells
a different program from the same program allocated differently by ptxas. Token counts use the
method of benchmarks/kernel_token_lengths.py when --tokenizer is given.

    python -m benchmarks.header_equivalence --family mma_sync --tokenizer TOKENIZER_DIR \\
        --out benchmarks/headers/equivalence_mma_sync.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from pathlib import Path

from tqdm import tqdm

from hgemm.candidate import INCLUDE_DIR, parse_candidate
from hgemm.compile import compile_candidate, compile_flags, find_cuda_tool, find_nvcc, nvcc_version
from hgemm.envinfo import environment

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("mma_sync", "skinny", "batched_small")
ARCH = "sm_90a"


def old_family(name: str, ref: str, into: Path):
    """The family module as it is at git `ref`, importable beside this checkout's."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "kernels_corpus/families"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    pkg = into / "ref_families"
    (into / "kernels_corpus/families").rename(pkg)
    (pkg / "__init__.py").write_text("")   # the package's own __init__ imports every family
    sys.path.insert(0, str(into))
    return importlib.import_module(f"ref_families.{name}")


_ADDR = re.compile(r"/\*[0-9a-f]{4,}\*/")
_ENCODING = re.compile(r"/\* 0x[0-9a-f]+ \*/")
_MANGLED = re.compile(r"_Z[\w$]+")


def sass(cubin: str) -> list[str]:
    """The cubin's SASS, one instruction a line, without addresses, encodings or mangled names."""
    out = subprocess.run([find_cuda_tool("cuobjdump"), "-sass", cubin], check=True, capture_output=True,
                         text=True).stdout
    lines = []
    for line in out.splitlines():
        line = _MANGLED.sub("SYM", _ENCODING.sub("", _ADDR.sub("", line))).split()
        if line:
            lines.append(" ".join(line))
    return lines


_PTX_REG = re.compile(r"%(rd|r|p|f|fd|rs|h|hh)\d+\b")
_PTX_LABEL = re.compile(r"\$L__\w+")


def ptx_renumbered(text: str, layout: str, tmp: Path) -> list[str]:
    """The PTX of a candidate with debug lines dropped, mangled names and labels normalised and virtual
    registers renumbered in order of first use."""
    src, ptx = tmp / "k.cu", tmp / "k.ptx"
    src.write_text(text)
    flags = [f for f in compile_flags(ARCH, layout) if f not in ("-Xptxas", "-v", "-lineinfo")]
    subprocess.run([find_nvcc(), "-ptx", *flags, "-I", str(INCLUDE_DIR), "-o", str(ptx), str(src)],
                   check=True, capture_output=True)
    names: dict[str, str] = {}
    out = []
    for line in ptx.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("//", ".loc", ".file", ".b8", ".reg")) or "info_string" in line:
            continue
        line = _PTX_REG.sub(lambda m: names.setdefault(m.group(0), f"%{m.group(1)}_{len(names)}"), line)
        out.append(_PTX_LABEL.sub("$L", _MANGLED.sub("SYM", line)))
    return out


def compile_pair(job) -> dict:
    """Compile one instantiation old and new (cold caches) and compare them."""
    name, layout, old_text, new_text = job
    row = {"variant": name, "layout": layout}
    with tempfile.TemporaryDirectory(prefix="hgemm-eq-") as tmp:
        tmp = Path(tmp)
        codes = {}
        for side, text in (("old", old_text), ("new", new_text)):
            res = compile_candidate(parse_candidate(text), layout, arch=ARCH, cache_dir=tmp / side)
            if not res.ok:
                row.update(identical=False, error=f"{side}: {res.error[:2000]}")
                return row
            r = res.resources
            row[f"regs_{side}"], row[f"smem_static_{side}"] = r.registers, r.smem_static
            row[f"spills_{side}"] = r.spill_stores + r.spill_loads
            row[f"stack_{side}"] = r.stack_frame
            row[f"compile_s_{side}"] = round(res.seconds, 2)
            codes[side] = sass(res.cubin_path)
        row["sass_lines_old"], row["sass_lines_new"] = len(codes["old"]), len(codes["new"])
        row["identical"] = codes["old"] == codes["new"]
        if not row["identical"]:
            row["sass_lines_differing"] = sum(a != b for a, b in zip(codes["old"], codes["new"])) + abs(
                len(codes["old"]) - len(codes["new"]))
            row["ptx_equivalent"] = ptx_renumbered(old_text, layout, tmp) == ptx_renumbered(new_text, layout, tmp)
    return row


def token_counter(path: str | None):
    if not path:
        return None
    from training.model import load_tokenizer

    tok = load_tokenizer(path)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", required=True, choices=FAMILIES)
    ap.add_argument("--ref", default="main", help="git ref whose renders are the reference (default: main)")
    ap.add_argument("--jobs", type=int, default=2, help="compiles in parallel (each nvcc uses one core)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N variants (a quick look)")
    ap.add_argument("--tokenizer", default=None, help="a tokenizer folder (stages.tokenizer output) for token counts")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if find_nvcc() is None or find_cuda_tool("cuobjdump") is None:
        sys.exit("header_equivalence: needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump)")

    new = importlib.import_module(f"kernels_corpus.families.{args.family}")
    count = token_counter(args.tokenizer)
    with tempfile.TemporaryDirectory(prefix="hgemm-ref-") as ref_dir:
        old = old_family(args.family, args.ref, Path(ref_dir))
        params = old.variants()[:args.limit]
        assert [new.name(p) for p in new.variants()[:args.limit]] == [old.name(p) for p in params], \
            "the variant lists differ: compare renders of the same parameters"
        jobs, tokens = [], {}
        for p in params:
            old_text, new_text = old.render(p), new.render(p)
            assert parse_candidate(old_text).spec == parse_candidate(new_text).spec, f"{new.name(p)}: spec changed"
            if count:
                tokens[new.name(p)] = {"old": count(old_text), "new": count(new_text)}
            jobs += [(new.name(p), layout, old_text, new_text) for layout in parse_candidate(new_text).spec.layouts]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.jobs) as ex:
            rows = list(tqdm(ex.map(compile_pair, jobs), total=len(jobs), desc=args.family))
    for row in rows:
        row.update({f"tokens_{k}": v for k, v in tokens.get(row["variant"], {}).items()})
    identical = sum(r["identical"] for r in rows)
    summary = {
        "instantiations": len(rows), "identical": identical,
        "ptx_equivalent_sass_differs": sum(bool(r.get("ptx_equivalent")) for r in rows if not r["identical"]),
        "errors": sum("error" in r for r in rows),
        "same_registers": sum(r.get("regs_old") == r.get("regs_new") for r in rows),
        "spills_new": sum(r.get("spills_new", 0) for r in rows),
        "max_compile_s_new": max((r.get("compile_s_new", 0) for r in rows), default=0),
        "max_compile_s_old": max((r.get("compile_s_old", 0) for r in rows), default=0),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    if tokens:
        summary["max_tokens_old"] = max(t["old"] for t in tokens.values())
        summary["max_tokens_new"] = max(t["new"] for t in tokens.values())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": "python -m benchmarks.header_equivalence " + " ".join(sys.argv[1:] if argv is None else argv),
        "family": args.family, "ref": args.ref, "arch": ARCH, "nvcc": nvcc_version(), "jobs": args.jobs,
        "flags": compile_flags(ARCH, "TN") + ["-I", "hgemm/include"], "tokenizer": args.tokenizer,
        "env": environment(None), "summary": summary, "rows": rows,
    }, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

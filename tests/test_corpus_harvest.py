"""Harvesting from a fixture package folder (never the real site-packages), filters, and the end-to-end build."""

from __future__ import annotations

import glob
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from configured import settings
from hgemm.problem import Problem
from kernels_corpus import filters, harvest
from kernels_corpus.build import CorpusConfig, build_corpus

SAXPY = """#include <cuda_fp16.h>
// y = a * x + y over n halves, grid-stride loop so any launch size covers the array.
extern "C" __global__ void saxpy_half(int n, float a, const __half* x, __half* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float v = a * __half2float(x[i]) + __half2float(y[i]);
    y[i] = __float2half_rn(v);
  }
}
"""

REDUCE = """// Block-wide sum with shared memory, then one atomicAdd per block into the result.
template <int BLOCK>
__global__ void block_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float partial[BLOCK];
  int tid = threadIdx.x;
  int i = blockIdx.x * BLOCK + tid;
  partial[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) atomicAdd(out, partial[0]);
}
"""

HOST_ONLY = "#pragma once\n// A plain C++ header with no device code at all.\n" + "inline int add(int a, int b) { return a + b; }\n" * 10


def write_fake_package(site: Path, name: str, version: str, licence: str, files: dict[str, bytes | str],
                       dangling: tuple[str, ...] = ()) -> None:
    """A minimal installed distribution: NAME-VERSION.dist-info (METADATA + RECORD) and its files."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\nLicense-Expression: {licence}\n")
    record = []
    for rel, content in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        record.append(f"{rel},,")
    record += [f"{rel},," for rel in dangling]  # listed in RECORD but gone from disk: unreadable
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def fake_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    write_fake_package(site, "fakecuda", "1.2.3", "MIT", {
        "fakecuda/include/saxpy.cuh": SAXPY,
        "fakecuda/include/reduce.cu": REDUCE,
        "fakecuda/include/host.h": HOST_ONLY,
        "fakecuda/include/blob.cuh": b"\x7fELF\x00\x00\x01" + b"__global__" * 50,
        "fakecuda/include/latin1.h": ("// caf\xe9 " + SAXPY).encode("latin-1"),
        "fakecuda/module.py": "print('not CUDA-ish by extension')\n",
    }, dangling=("fakecuda/include/gone.cu",))
    write_fake_package(site, "closedcuda", "0.1", "LicenseRef-Proprietary", {"closedcuda/k.cu": REDUCE})
    return site


def test_harvest_skips_binary_non_utf8_and_unreadable(fake_site):
    skips, missing = Counter(), []
    dists = harvest.find_distributions(["fakecuda"], [str(fake_site)], missing)
    docs = list(harvest.harvest_package(dists[0], [".cu", ".cuh", ".h"], [], skips))
    assert sorted(d.path for d in docs) == ["fakecuda/include/host.h", "fakecuda/include/reduce.cu",
                                            "fakecuda/include/saxpy.cuh"]
    assert skips == {"binary": 1, "non_utf8": 1, "unreadable": 1}
    d = docs[0]
    assert (d.source, d.package, d.version, d.licence) == ("package", "fakecuda", "1.2.3", "MIT")


def test_missing_package_is_a_warning(fake_site, caplog):
    missing = []
    with caplog.at_level(logging.WARNING):
        dists = harvest.find_distributions(["fakecuda", "not-installed-pkg", "closed*"], [str(fake_site)], missing)
    assert [d.metadata["Name"] for d in dists] == ["closedcuda", "fakecuda"]
    assert missing == ["package not-installed-pkg"]
    assert "not-installed-pkg" in caplog.text


@pytest.mark.parametrize("licence, ok", [
    ("MIT", True), ("mit", True), ("BSD-3-Clause", True), ("GPL-3.0-only", False),
    ("Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND MIT", True), ("MIT AND GPL-3.0-only", False),
    ("GPL-3.0-only OR MIT", True), ("unknown", False),
])
def test_licence_allowlist(licence, ok):
    assert harvest.licence_allowed(licence, ["MIT", "BSD-3-Clause", "Apache-2.0"]) is ok


def _settings(**kw) -> filters.FilterSettings:
    cfg = settings(CorpusConfig, "corpus", **kw)
    return filters.FilterSettings(cfg.min_bytes, cfg.max_bytes, tuple(cfg.cuda_markers), tuple(cfg.generated_markers),
                                  cfg.generated_head_bytes, cfg.max_numeric_fraction, cfg.max_line_length,
                                  tuple(cfg.licence_allowlist))


def _doc(text: str, licence: str = "MIT") -> harvest.Document:
    return harvest.Document(text, "package", "p", "1", "x.cu", licence)


def test_filters_drop_reasons():
    s = _settings(min_bytes=64, max_bytes=2000)
    table = "__device__ const float lut[] = {\n" + ",\n".join(", ".join(str(i * j) for j in range(16))
                                                          for i in range(40)) + "};\n"
    assert filters.drop_reason(_doc(SAXPY), s) is None
    assert filters.drop_reason(_doc(SAXPY, "GPL-3.0-only"), s) == "licence"
    assert filters.drop_reason(_doc("__global__ void f();"), s) == "too_small"
    assert filters.drop_reason(_doc(SAXPY * 20), s) == "too_large"
    assert filters.drop_reason(_doc(HOST_ONLY), s) == "no_cuda"
    assert filters.drop_reason(_doc("// This file is auto-generated. Do not edit.\n" + SAXPY), s) == "generated"
    assert filters.drop_reason(_doc(table[:1990]), s) == "generated"


def _config(site: Path, heldout: Path | None = None, **kw) -> CorpusConfig:
    return settings(CorpusConfig, "corpus", packages=["fakecuda", "closedcuda", "absent-pkg"],
                    search_paths=[str(site)], extensions=[".cu", ".cuh", ".h"], reference_globs=[], family_variants=0,
                    tuned=[], tuned_contrasts=2, tuned_exclude_grids=[], include_tasks=False, min_bytes=64, heldout_globs=[str(heldout)] if heldout else [],
                    validation_fraction=0.5, **kw)


def test_build_writes_dataset_stats_and_is_deterministic(fake_site, tmp_path):
    from datasets import load_from_disk

    runs = []
    for name in ("a", "b"):
        metrics = build_corpus(_config(fake_site), tmp_path / name, progress=False)
        ds = load_from_disk(str(tmp_path / name / "dataset"))
        runs.append(({split: ds[split].to_list() for split in ds}, (tmp_path / name / "stats.json").read_text()))
    assert runs[0] == runs[1]
    rows, stats_text = runs[0]
    stats = json.loads(stats_text)
    assert set(rows) == {"train", "validation"}
    all_rows = rows["train"] + rows["validation"]
    assert sorted(r["path"] for r in all_rows) == ["fakecuda/include/reduce.cu", "fakecuda/include/saxpy.cuh"]
    assert {"text", "source", "package", "version", "path", "licence", "bytes", "tokens", "sha256"} <= set(all_rows[0])
    assert stats["filters"]["dropped"] == {"licence": 1, "no_cuda": 1}
    assert stats["harvest"]["files_skipped"] == {"binary": 1, "non_utf8": 1, "unreadable": 1}
    assert stats["missing_sources"] == ["package absent-pkg"]
    assert metrics["documents"] == 2 and stats["total"]["docs"] == 2
    assert "| package | fakecuda | 1.2.3 | MIT |" in (tmp_path / "a" / "stats.md").read_text()


def test_stage_cli_writes_metrics_last(fake_site, tmp_path):
    import yaml

    from stages.corpus import main

    cfg = {k: v for k, v in vars(_config(fake_site)).items()}
    cfg_file = tmp_path / "exp.yaml"
    cfg_file.write_text(yaml.safe_dump({"corpus": cfg, "tokenizer": {"vocab_size": 300}}))
    out = tmp_path / "out"
    assert main(["--config", str(cfg_file), "--out", str(out), "--no-progress", "--set", "seed=3"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["documents"] == 2
    assert (out / "metrics.json").stat().st_mtime_ns >= (out / "stats.json").stat().st_mtime_ns


def test_project_sources_are_lazy_and_carry_provenance(monkeypatch):
    import sys
    import types

    missing = []
    assert harvest._lazy("kernels_corpus.no_such_module", "f", missing) is None
    assert missing == ["kernels_corpus.no_such_module.f"]

    fake = types.ModuleType("kernels_corpus.families")
    fake.sample_variants = lambda n, seed: [(f"v{i}_s{seed}", SAXPY) for i in range(n)]
    monkeypatch.setitem(sys.modules, "kernels_corpus.families", fake)
    docs = list(harvest.harvest_family_variants(2, 5, missing))
    assert [d.path for d in docs] == ["families/v0_s5", "families/v1_s5"]
    assert {(d.source, d.package, d.licence) for d in docs} == {("family_variant", "hgemm-l2", "project")}


def test_seed_variants_are_framed_as_prompt_and_answer():
    """Pretraining must show the exact prompt -> candidate -> <|end|> framing the RL stages sample with."""
    from hgemm.candidate import parse_candidate
    from training.prompts import CANDIDATE_TOKEN, PROBLEM_TOKEN, completion_to_candidate

    docs = list(harvest.harvest_family_variants(4, 1, []))
    assert len(docs) == 4
    for d in docs:
        assert d.text.startswith(PROBLEM_TOKEN) and d.text.rstrip().endswith("<|end|>")
        answer = d.text.split(CANDIDATE_TOKEN, 1)[1]
        cand = parse_candidate(completion_to_candidate(answer))
        shape = d.text.split("shape: ", 1)[1].splitlines()[0]
        layout = "TN" if "layout TN" in d.text else "NN"
        assert cand.supports(layout), (d.path, shape, layout)
    tasks = list(harvest.harvest_tasks([]))
    assert tasks and all(t.text.startswith(PROBLEM_TOKEN) for t in tasks)


def test_a_family_the_framing_grid_lacks_is_framed_with_a_problem_it_serves():
    # the default grid has no N <= 16 shape: a narrow-N variant is framed with one of the shape sample's
    import random

    from hgemm.problem import Problem
    from kernels_corpus.families import narrow

    params = dict(kind="narrow", nb=4, lpr=32, r=2, kw=1, swap=False)
    text = harvest.frame_family_variant(narrow.name(params), narrow.render(params), random.Random(0))
    m, n, k, b = (int(v.split("=")[1]) for v in text.split("shape: ", 1)[1].splitlines()[0].split())
    assert narrow.applicable(params, Problem(m, n, k, b)) and 3 <= n <= 4


def test_reference_kernels_are_framed_for_several_problems():
    from collections import Counter

    from training.prompts import PROBLEM_TOKEN

    docs = list(harvest.harvest_reference(["kernels_corpus/reference/*.cu"], Counter(), framings=5, seed=3))
    framed = [d for d in docs if d.text.startswith(PROBLEM_TOKEN)]
    n = len(glob.glob(harvest.resolve_project_path("kernels_corpus/reference/*.cu")))
    assert n >= 4 and len(docs) == n + 5 * n and len(framed) == 5 * n
    assert len({d.path for d in framed}) == 5 * n  # distinct problems, recorded in the path
    again = list(harvest.harvest_reference(["kernels_corpus/reference/*.cu"], Counter(), framings=5, seed=3))
    assert [d.path for d in again] == [d.path for d in docs]  # deterministic for a seed


def test_reference_kernels_are_framed_with_kernels_in_the_prompt():
    """RL prompts show kernels (rl_hgemm's context); pretraining must too, in the same words."""
    from collections import Counter

    from hgemm.candidate import parse_candidate
    from training.prompts import CANDIDATE_TOKEN, completion_to_candidate

    files = sorted(glob.glob(harvest.resolve_project_path("kernels_corpus/reference/*.cu")))
    texts = [Path(f).read_text() for f in files]
    docs = list(harvest.harvest_reference(["kernels_corpus/reference/*.cu"], Counter(), framings=0, seed=3,
                                          context_framings=4))
    framed = [d for d in docs if "#context" in d.path]
    assert len(docs) == len(files) * 5 and len(framed) == len(files) * 4
    for d in framed:
        prompt, answer = d.text.split(CANDIDATE_TOKEN, 1)
        shown = prompt.count("speed not measured:")
        assert shown in (1, 2) and prompt.count("```cuda") == shown
        assert sum(t.strip() in prompt for t in texts) == shown  # whole reference kernels, none cut
        own = texts[[harvest.project_relative(f) for f in files].index(d.path.split("#")[0])]
        assert parse_candidate(completion_to_candidate(answer)).source.strip() in own
    assert len({d.text for d in framed}) > 6  # the shown kernels and problems vary


def test_task_solutions_are_also_framed_with_the_solution_shown():
    from training.prompts import CANDIDATE_TOKEN, reference_block

    docs = list(harvest.harvest_tasks([], framed=True, with_reference=True))
    plain = {d.path: d for d in docs if not d.path.endswith("#reference")}
    shown = [d for d in docs if d.path.endswith("#reference")]
    assert shown and len(shown) == len(plain)
    for d in shown:
        bare = plain[d.path.removesuffix("#reference")]
        bare_prompt, answer = bare.text.split(CANDIDATE_TOKEN, 1)
        prompt, same_answer = d.text.split(CANDIDATE_TOKEN, 1)
        assert answer == same_answer
        solution = answer.strip().removesuffix("<|end|>").strip()
        assert prompt == bare_prompt.rstrip("\n") + "\n" + reference_block(solution) + "\n"
    assert not any(d.path.endswith("#reference") for d in harvest.harvest_tasks([], framed=True))


def test_default_dedup_keeps_both_framings_of_a_task():
    """A task framed with its solution shown is a near-duplicate of its plain framing by design."""
    import dataclasses

    from kernels_corpus.dedup import DedupSettings, deduplicate

    docs = list(harvest.harvest_tasks([], framed=True, with_reference=True))
    cfg = settings(CorpusConfig, "corpus")
    s = DedupSettings(cfg.dedup_threshold, cfg.dedup_num_perm, cfg.dedup_shingle_tokens, cfg.seed,
                      tuple(cfg.near_dup_exempt_sources))
    assert deduplicate(docs, s, progress=False).kept == list(range(len(docs)))
    strict = dataclasses.replace(s, near_dup_exempt_sources=())
    assert len(deduplicate(docs, strict, progress=False).kept) < len(docs)  # what the exemption prevents


def _tune_folder(tmp_path, measured: dict[str, dict[str, float]] | None):
    """A tune folder as hgemm tune writes it: table.json, kernels/, and (unless None) a bench file whose
    candidates carry the given speedups."""
    import gzip

    from kernels_corpus.families import mma_sync

    root = Path(__file__).resolve().parents[1]
    params = mma_sync.variants()[0]
    (tmp_path / "kernels").mkdir(parents=True)
    reference = (root / "kernels_corpus/reference/mma_sync.cu").read_text()
    (tmp_path / "kernels" / "reference_mma_sync.cu").write_text(reference)
    entry = {"kernel": mma_sync.name(params), "time_us": 12.5, "speedup_vs_best": 0.87, "best_baseline": "cublas",
             "shape_class": "aligned", "references": {"reference_mma_sync": 0.05}}
    table = {"env": {"gpus": [{"name": "NVIDIA H200"}]}, "fallback": "reference_mma_sync", "entries": {
        "b1_m1024_n1024_k1024_NN": entry,
        "b1_m64_n64_k64_NN": dict(entry, kernel="reference_mma_sync"),  # not a family render: left out
        "b1_m333_n64_k64_TN": entry,
    }}
    (tmp_path / "table.json").write_text(json.dumps(table))
    if measured is not None:
        problems = [{"problem": Problem.from_key(key).to_dict(), "candidates": {
            name: {"status": "ok", "speedup_vs_best": s} for name, s in timed.items()}} for key, timed in measured.items()]
        with gzip.open(tmp_path / "bench.json.gz", "wt") as f:
            f.write(json.dumps({"problems": problems}))
    return tmp_path, mma_sync, params, reference


def test_tuned_winners_are_framed_with_their_measured_speed(tmp_path):
    folder, mma_sync, params, reference = _tune_folder(tmp_path, None)
    name = mma_sync.name(params)
    docs = list(harvest.harvest_tuned([str(folder)], {"b1_m333_n64_k64_TN"}, 2, []))
    assert [d.source for d in docs] == ["tuned"]  # the excluded shape and the reference entry left out
    assert docs[0].path == f"tuned/{folder.name}/b1_m1024_n1024_k1024_NN:{name}"
    text = docs[0].text
    prompt, answer = text.split("<|candidate|>\n")
    assert "shape: M=1024 N=1024 K=1024 batch=1" in prompt
    # without the tune's results file, the reference kernel timed there is the context
    assert "reference kernel 1, 0.05x the fastest baseline" in prompt and reference.strip() in prompt
    assert answer.startswith("// measured on NVIDIA H200: 12.5 us, 0.87x the strongest baseline (cublas)\n")
    assert mma_sync.render(params).strip() in answer and answer.endswith("<|end|>")


def test_tuned_prompts_show_other_family_kernels_timed_on_the_shape_slowest_first(tmp_path):
    from kernels_corpus.families import mma_sync

    variants = mma_sync.variants()
    names = [mma_sync.name(p) for p in variants[1:5]]
    timed = {names[0]: 0.2, names[1]: 0.4, names[2]: 0.6, names[3]: 0.95,  # faster than the winner: not shown
             "reference_mma_sync": 0.05, "beside:x": 0.9}
    folder, _, params, reference = _tune_folder(tmp_path, {"b1_m1024_n1024_k1024_NN": timed})
    docs = {d.path.split("/")[-1].split(":")[0]: d.text for d in harvest.harvest_tuned([str(folder)], set(), 2, [])}
    prompt = docs["b1_m1024_n1024_k1024_NN"].split("<|candidate|>\n")[0]
    slow, fast = mma_sync.render(variants[1]).strip(), mma_sync.render(variants[3]).strip()
    assert slow in prompt and fast in prompt and prompt.index(slow) < prompt.index(fast)
    assert "0.20x the fastest baseline" in prompt and "0.60x the fastest baseline" in prompt
    assert mma_sync.render(variants[2]).strip() not in prompt and reference.strip() not in prompt
    # a shape the results file does not hold keeps the reference context
    assert reference.strip() in docs["b1_m333_n64_k64_TN"]

"""Decontamination: a planted held-out kernel is found by n-gram overlap and dropped; the report says so."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter

from configured import settings
from kernels_corpus.build import CorpusConfig, build_corpus
from kernels_corpus.decontam import find_contaminated, load_heldout
from kernels_corpus.harvest import PROJECT_ROOT, Document, harvest_reference

HELDOUT = (PROJECT_ROOT / "kernels_corpus/heldout/smem_tile32.cu").read_text()
NAIVE = (PROJECT_ROOT / "kernels_corpus/reference/naive.cu").read_text()


def planted(text: str) -> str:
    """The held-out kernel hidden in a bigger file, with its comments rewritten and the spec dropped."""
    body = re.sub(r"/\*@launch.*?@\*/", "", text, flags=re.DOTALL)
    body = re.sub(r"//[^\n]*", "// rewritten comment", body)
    return "#include <cstdio>\n// some other helper\n__device__ int twice(int x) { return 2 * x; }\n" + body


def doc(text: str, path: str) -> Document:
    return Document(text, "reference", "hgemm-l2", "0", path, "project")


def test_planted_heldout_kernel_is_dropped(tmp_path):
    heldout_file = tmp_path / "heldout.cu"
    heldout_file.write_text(HELDOUT)
    heldout = load_heldout([str(heldout_file)], 13)
    docs = [doc(NAIVE, "naive.cu"), doc(planted(HELDOUT), "planted.cu")]
    bad, report = find_contaminated(docs, heldout, 13, 0.5, progress=False)
    assert bad == {1}
    assert report["docs_dropped"] == 1 and report["rate"] == 0.5
    row = report["per_kernel"][0]
    assert row["docs_dropped"] == 1 and row["max_overlap"] > 0.9
    assert report["max_overlap_kept"] < 0.5  # the naive kernel shares idioms, not the kernel


def test_build_drops_planted_kernel_and_reports_it(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "planted.cu").write_text(planted(HELDOUT))
    (tmp_path / "src" / "naive.cu").write_text(NAIVE)
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "k.cu").write_text(HELDOUT)
    cfg = settings(CorpusConfig, "corpus", packages=[], reference_globs=[str(tmp_path / "src" / "*.cu")],
                   family_variants=0, tuned=[], tuned_contrasts=2, tuned_exclude_grids=[], reference_framings=0, context_framings=0, include_tasks=False,
                   heldout_globs=[str(tmp_path / "held" / "*.cu")])
    metrics = build_corpus(cfg, tmp_path / "out", progress=False)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert metrics["documents"] == 1 and metrics["decontam_rate"] == 0.5
    assert stats["decontam"]["docs_dropped"] == 1
    from datasets import load_from_disk

    ds = load_from_disk(str(tmp_path / "out" / "dataset"))
    paths = [p for split in ds.values() for p in split["path"]]
    assert len(paths) == 1 and paths[0].endswith("naive.cu")
    # framings that show the planted kernel inside a prompt are caught too; those showing only the
    # clean one are kept
    framed = dataclasses.replace(cfg, context_framings=6)
    harvested = list(harvest_reference(framed.reference_globs, Counter(), 0, framed.seed, framed.context_framings))
    clean = {d.text for d in harvested if "int twice(int x)" not in d.text}  # the planted kernel's helper
    assert len(clean) < len(harvested)
    build_corpus(framed, tmp_path / "framed", progress=False)
    ds = load_from_disk(str(tmp_path / "framed" / "dataset"))
    assert {t for split in ds.values() for t in split["text"]} == clean


def test_default_heldout_kernels_exist_and_are_not_in_reference():
    heldout = load_heldout(["kernels_corpus/heldout/*.cu"], 13)
    assert len(heldout) >= 2 and all(h.ngrams for h in heldout)
    bad, _ = find_contaminated([doc(NAIVE, "naive.cu")], heldout, 13, 0.5, progress=False)
    assert not bad

"""Build the CUDA pretraining corpus: harvest -> filter -> dedup -> decontaminate -> split -> save.

The output is a function of the config (seed included) and the installed packages only: inputs are visited
in sorted order, sampling is seeded, and the train/validation split is decided by a hash of each document,
not by a shuffle. Outputs in `out_dir`: `dataset/` (a datasets.DatasetDict, save_to_disk), `stats.json`,
`stats.md`. The stage CLI (stages/corpus.py) writes metrics.json last.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from hgemm.files import atomic_write_text, config_hash, write_json
from hgemm.problem import load_grid
from kernels_corpus import decontam, dedup, filters, harvest

COLUMNS = ("text", "source", "package", "version", "path", "licence", "bytes", "tokens", "sha256")
SHARD_BYTES = 256 * 2**20
PRETOKEN_UNIT = "pretokens (GPT-2 byte-level pre-tokenizer pieces; a lower bound on BPE tokens)"


@dataclass
class CorpusConfig:
    """The `corpus:` section (values: configs/default.yaml, which says why each is what it is)."""

    seed: int
    packages: list  # installed distributions to harvest, names or globs; missing ones are skipped
    search_paths: list | None  # where to look for installed packages; None = sys.path
    extensions: list
    exclude_path_globs: list  # fnmatch globs on paths inside a package
    max_docs_per_package: int | None  # seeded subsample after filtering; None = all
    reference_globs: list
    reference_framings: int  # each reference kernel also framed as the answer to this many grid problems
    # Framings whose prompts hold kernels, as the RL prompts do: each reference kernel this many more times
    # with one or two reference kernels shown (rl_hgemm's contrastive context), and each task solution
    # once more with itself shown (rl_general's tasks.show_reference). 0: none.
    context_framings: int
    family_variants: int  # rendered seed-family variants
    tuned: list  # tune folders whose winners are framed with their measured speeds
    tuned_contrasts: int  # other kernels timed on the shape shown in a tuned winner's prompt
    tuned_exclude_grids: list  # grid files whose shapes never appear as tuned documents (held-out sets)
    include_tasks: bool  # the general task suite's reference solutions
    frame_examples: bool  # seed variants and task solutions as prompt -> candidate -> <|end|>
    licence_allowlist: list  # SPDX ids, case-insensitive
    min_bytes: int
    max_bytes: int
    cuda_markers: list  # regexes; a document must match one
    generated_markers: list  # regexes searched in the first generated_head_bytes
    generated_head_bytes: int
    max_numeric_fraction: float  # share of number literals among words above which a file is a table
    max_line_length: int
    dedup_threshold: float  # MinHash Jaccard estimate at or above which a document is a near-duplicate
    dedup_num_perm: int
    dedup_shingle_tokens: int
    near_dup_exempt_sources: list  # sources only exact-deduplicated
    heldout_globs: list
    decontam_ngram: int
    decontam_threshold: float  # share of a held-out kernel's n-grams a document may not reach
    validation_fraction: float
    token_counter: str | None  # tokenizer path for the token columns; None = pretoken count


def collect(cfg: CorpusConfig, skips: Counter, missing: list[str]):
    """Every raw document, project sources first so that they win exact/near-duplicate ties."""
    framed = cfg.frame_examples
    yield from harvest.harvest_reference(cfg.reference_globs, skips, cfg.reference_framings if framed else 0,
                                         cfg.seed, cfg.context_framings if framed else 0)
    if cfg.include_tasks:
        yield from harvest.harvest_tasks(missing, framed, with_reference=framed and cfg.context_framings > 0)
    yield from harvest.harvest_family_variants(cfg.family_variants, cfg.seed, missing, cfg.frame_examples)
    exclude = {p.key for path in cfg.tuned_exclude_grids for p in load_grid(harvest.resolve_project_path(path))}
    yield from harvest.harvest_tuned(cfg.tuned, exclude, cfg.tuned_contrasts, missing)
    yield from harvest.harvest_packages(cfg, skips, missing)


def _seeded_rank(seed: int, text: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\0{text}".encode()).digest()[:8], "big")


def subsample_packages(docs: list, limit: int | None, seed: int) -> list:
    """At most `limit` documents per package, chosen by seeded hash rank, in their original order."""
    if limit is None:
        return docs
    by_package = defaultdict(list)
    for i, d in enumerate(docs):
        if d.source == "package":
            by_package[d.package].append(i)
    dropped = set()
    for indices in by_package.values():
        ranked = sorted(indices, key=lambda i: _seeded_rank(seed, docs[i].path))
        dropped.update(ranked[limit:])
    return [d for i, d in enumerate(docs) if i not in dropped]


def split_of(doc, seed: int, validation_fraction: float) -> str:
    """A per-document hash decides the split, so adding a package does not reshuffle the others."""
    return "validation" if _seeded_rank(seed, doc.text) % 1_000_000 < validation_fraction * 1_000_000 else "train"


def token_counter(path: str | None):
    if path:
        from transformers import AutoTokenizer  # heavy: only to count a model tokenizer's tokens

        tok = AutoTokenizer.from_pretrained(harvest.resolve_project_path(path))
        return lambda text: len(tok.encode(text, add_special_tokens=False)), f"tokens ({path})"
    from tokenizers.pre_tokenizers import ByteLevel  # HF tokenizers, only when tokens are counted

    pre = ByteLevel(add_prefix_space=False)
    return lambda text: len(pre.pre_tokenize_str(text)), PRETOKEN_UNIT


def build_corpus(cfg: CorpusConfig, out_dir: str | Path, progress: bool = True) -> dict:
    """Build and save the corpus; returns the metrics for the stage's metrics.json."""
    from datasets import Dataset, DatasetDict, Features, Value  # heavy (pyarrow, pandas): only to write the corpus

    start = time.perf_counter()
    out_dir = Path(out_dir)
    skips, missing = Counter(), []
    settings = filters.FilterSettings(
        cfg.min_bytes, cfg.max_bytes, tuple(cfg.cuda_markers), tuple(cfg.generated_markers),
        cfg.generated_head_bytes, cfg.max_numeric_fraction, cfg.max_line_length, tuple(cfg.licence_allowlist),
    )
    raw, kept = 0, []
    dropped = defaultdict(Counter)  # reason -> source/package -> count
    for doc in tqdm(collect(cfg, skips, missing), desc="harvest+filter", unit="file", disable=not progress):
        raw += 1
        reason = filters.drop_reason(doc, settings)
        if reason:
            dropped[reason][_source_key(doc)] += 1
        else:
            kept.append(doc)
    filtered = subsample_packages(kept, cfg.max_docs_per_package, cfg.seed)

    dd = dedup.deduplicate(filtered, dedup.DedupSettings(
        cfg.dedup_threshold, cfg.dedup_num_perm, cfg.dedup_shingle_tokens, cfg.seed,
        tuple(cfg.near_dup_exempt_sources)), progress=progress)
    unique = [filtered[i] for i in dd.kept]

    heldout = decontam.load_heldout(cfg.heldout_globs, cfg.decontam_ngram)
    bad, decontam_report = decontam.find_contaminated(
        unique, heldout, cfg.decontam_ngram, cfg.decontam_threshold, progress=progress)
    final = [d for i, d in enumerate(unique) if i not in bad]

    count, token_unit = token_counter(cfg.token_counter)
    rows = {"train": [], "validation": []}
    for doc in tqdm(final, desc="count+split", unit="doc", disable=not progress):
        row = doc.as_row()
        row["bytes"] = len(doc.text.encode("utf-8"))
        row["sha256"] = hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
        row["tokens"] = count(doc.text)
        rows[split_of(doc, cfg.seed, cfg.validation_fraction)].append(row)
    if not rows["validation"] and len(rows["train"]) > 1:
        rows["validation"].append(rows["train"].pop())  # a tiny corpus still gets a validation split

    # Explicit features: an empty split (tiny configs) must still carry the schema to save and load.
    features = Features({c: Value("int64" if c in ("bytes", "tokens") else "string") for c in COLUMNS})
    dataset = DatasetDict({
        name: Dataset.from_dict({c: [r[c] for r in split_rows] for c in COLUMNS}, features=features)
        for name, split_rows in rows.items()
    })
    _save_dataset_atomically(dataset, out_dir / "dataset")

    stats = {
        "config_hash": config_hash(asdict(cfg)),
        "seed": cfg.seed,
        "token_unit": token_unit,
        "missing_sources": missing,
        "harvest": {"documents": raw, "files_skipped": dict(sorted(skips.items()))},
        "filters": {
            "input": raw,
            "dropped": {r: sum(c.values()) for r, c in sorted(dropped.items())},
            "dropped_by_source": {r: dict(sorted(c.items())) for r, c in sorted(dropped.items())},
            "kept": len(kept),
            "subsampled_away": len(kept) - len(filtered),
        },
        "dedup": {
            "input": len(filtered),
            "exact_duplicates": dd.exact_duplicates,
            "near_duplicates": dd.near_duplicates,
            "rate": _rate(dd.exact_duplicates + dd.near_duplicates, len(filtered)),
            "threshold": cfg.dedup_threshold,
        },
        "decontam": decontam_report,
        "splits": {name: _totals(split_rows) for name, split_rows in rows.items()},
        "by_source": _group(rows, ("source", "package", "version", "licence")),
        "by_licence": _group(rows, ("licence",)),
        "total": _totals(rows["train"] + rows["validation"]),
    }
    write_json(out_dir / "stats.json", stats)
    atomic_write_text(out_dir / "stats.md", stats_markdown(stats))
    seconds = time.perf_counter() - start
    return {
        "documents": stats["total"]["docs"],
        "bytes": stats["total"]["bytes"],
        "tokens": stats["total"]["tokens"],
        "token_unit": token_unit,
        "train_docs": stats["splits"]["train"]["docs"],
        "validation_docs": stats["splits"]["validation"]["docs"],
        "harvested_documents": raw,
        "dedup_rate": stats["dedup"]["rate"],
        "decontam_rate": decontam_report["rate"],
        "build_seconds": round(seconds, 2),
        "harvested_docs_per_second": round(raw / seconds, 2) if seconds else 0.0,
    }


def _source_key(doc) -> str:
    return doc.package if doc.source == "package" else doc.source


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def _totals(rows: list[dict]) -> dict:
    return {"docs": len(rows), "bytes": sum(r["bytes"] for r in rows), "tokens": sum(r["tokens"] for r in rows)}


def _group(rows: dict, keys: tuple[str, ...]) -> list[dict]:
    groups = defaultdict(list)
    for split_rows in rows.values():
        for r in split_rows:
            groups[tuple(r[k] for k in keys)].append(r)
    return [{**dict(zip(keys, key)), **_totals(groups[key])} for key in sorted(groups)]


def _save_dataset_atomically(dataset, target: Path) -> None:
    """save_to_disk into a sibling temp dir, then swap it in: a crash never leaves a half-written dataset."""
    tmp, old = target.with_name(f".{target.name}.tmp"), target.with_name(f".{target.name}.old")
    for p in (tmp, old):
        shutil.rmtree(p, ignore_errors=True)
    # An explicit shard count: datasets writes zero shards for an empty split and then cannot load it.
    dataset.save_to_disk(str(tmp), num_shards={
        name: max(1, -(-split.data.nbytes // SHARD_BYTES)) for name, split in dataset.items()})
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def stats_markdown(stats: dict) -> str:
    total = stats["total"]
    dd, dc, flt = stats["dedup"], stats["decontam"], stats["filters"]
    parts = [
        "# CUDA corpus statistics",
        f"Config hash `{stats['config_hash']}`, seed {stats['seed']}. Token column: {stats['token_unit']}.",
        f"Total: {total['docs']:,} documents, {total['bytes']:,} bytes, {total['tokens']:,} tokens.",
        "## By source",
        _table(["source", "package", "version", "licence", "docs", "bytes", "tokens"],
               [[r["source"], r["package"], r["version"], r["licence"], r["docs"], r["bytes"], r["tokens"]]
                for r in stats["by_source"]]),
        "## By licence",
        _table(["licence", "docs", "bytes", "tokens"],
               [[r["licence"], r["docs"], r["bytes"], r["tokens"]] for r in stats["by_licence"]]),
        "## Splits",
        _table(["split", "docs", "bytes", "tokens"],
               [[name, s["docs"], s["bytes"], s["tokens"]] for name, s in stats["splits"].items()]),
        "## Pipeline",
        _table(["step", "in", "removed", "rate"], [
            ["filters", flt["input"], flt["input"] - flt["kept"], _rate(flt["input"] - flt["kept"], flt["input"])],
            ["dedup (exact + MinHash/LSH)", dd["input"], dd["exact_duplicates"] + dd["near_duplicates"], dd["rate"]],
            [f"decontam ({dc['ngram']}-gram overlap >= {dc['threshold']})", dc["docs_checked"], dc["docs_dropped"],
             dc["rate"]],
        ]),
        "Filter drops: " + (", ".join(f"{k} {v:,}" for k, v in flt["dropped"].items()) or "none") + ". "
        f"Exact duplicates {dd['exact_duplicates']:,}, near duplicates {dd['near_duplicates']:,}. "
        "Files skipped while reading: "
        + (", ".join(f"{k} {v:,}" for k, v in stats["harvest"]["files_skipped"].items()) or "none") + ".",
        f"Held-out kernels: {dc['heldout_kernels']}; the closest kept document shares "
        f"{dc['max_overlap_kept']:.1%} of a held-out kernel's {dc['ngram']}-grams.",
        "Missing sources (skipped): " + (", ".join(stats["missing_sources"]) or "none") + ".",
    ]
    return "\n\n".join(parts) + "\n"

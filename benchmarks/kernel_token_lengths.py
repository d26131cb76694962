"""Token lengths of the kernels the model should learn to write, under the project's tokenizer.

Context and completion lengths (pretraining blocks, sampling, RL completions) must hold a whole
candidate; this measures how long the reference kernels and the longest variant of each seed family
are, and, with --library, every kernel of a tuned library's dispatch table as its family renders it.

    python -m benchmarks.kernel_token_lengths --tokenizer results/tokenizer --library benchmarks/tune \
        --out benchmarks/corpus/kernel_token_lengths.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hgemm.envinfo import environment
from kernels_corpus.families import FAMILIES, all_params
from training.model import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="a tokenizer folder (stages.tokenizer output)")
    ap.add_argument("--library", default=None, help="a tune folder whose table.json kernels are measured too")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    tok = load_tokenizer(args.tokenizer)
    texts = {f"reference/{p.name}": p.read_text() for p in sorted((ROOT / "kernels_corpus/reference").glob("*.cu"))}
    for fam in FAMILIES:
        lengths = [len(fam.render(p)) for p in fam.variants()]
        longest = fam.variants()[lengths.index(max(lengths))]
        texts[f"{fam.__name__.rsplit('.', 1)[-1]} (longest: {fam.name(longest)})"] = fam.render(longest)
    if args.library:
        renders = {fam.name(p): fam.render(p) for fam, p in all_params()}
        table = json.loads((Path(args.library) / "table.json").read_text())
        names = sorted({e["kernel"] for e in table["entries"].values()} | {table["fallback"]})
        for name in names:
            # a family kernel as the family renders it; any other (a reference, a model's) as stored
            texts[f"library/{name}"] = renders.get(name) or (Path(args.library) / "kernels" / f"{name}.cu").read_text()
    rows = {name: {"tokens": len(tok(text, add_special_tokens=False)["input_ids"]), "bytes": len(text.encode())}
            for name, text in texts.items()}
    Path(args.out).write_text(json.dumps({"env": environment(None), "tokenizer": args.tokenizer, "kernels": rows},
                                         indent=1))
    for name, r in rows.items():
        print(f"{name:60s} {r['tokens']:6d} tokens {r['bytes']:7d} bytes")


if __name__ == "__main__":
    main()

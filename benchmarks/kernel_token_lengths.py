"""Token lengths of the kernels the model should learn to write, under the project's tokenizer.

Context and completion lengths (pretraining blocks, sampling, RL completions) must hold a whole
candidate; this measures how long the reference kernels and one variant of each seed family are.

    python -m benchmarks.kernel_token_lengths --tokenizer results/tokenizer --out benchmarks/corpus/kernel_token_lengths.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hgemm.envinfo import environment
from training.model import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="a tokenizer folder (stages.tokenizer output)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from kernels_corpus.families import FAMILIES

    tok = load_tokenizer(args.tokenizer)
    texts = {f"reference/{p.name}": p.read_text() for p in sorted((ROOT / "kernels_corpus/reference").glob("*.cu"))}
    for fam in FAMILIES:
        lengths = [len(fam.render(p)) for p in fam.variants()]
        longest = fam.variants()[lengths.index(max(lengths))]
        texts[f"{fam.__name__.rsplit('.', 1)[-1]} (longest: {fam.name(longest)})"] = fam.render(longest)
    rows = {name: {"tokens": len(tok(text, add_special_tokens=False)["input_ids"]), "bytes": len(text.encode())}
            for name, text in texts.items()}
    Path(args.out).write_text(json.dumps({"env": environment(None), "tokenizer": args.tokenizer, "kernels": rows},
                                         indent=1))
    for name, r in rows.items():
        print(f"{name:60s} {r['tokens']:6d} tokens {r['bytes']:7d} bytes")


if __name__ == "__main__":
    main()

"""One document model, two outputs. A document is a list of blocks:

    ("h", level, text) | ("p", text) | ("banner", text) | ("table", headers, rows)
    | ("figure", name, png_bytes, caption) | ("pre", text)

Markdown references figures as files under figures/; HTML embeds them as base64 PNGs so the one file
can be mailed or opened from a zip."""

from __future__ import annotations

import base64
import html
from pathlib import Path

CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:2px 6px}
td{text-align:right}td:first-child,td:nth-child(2){text-align:left}th{background:#f3f3f3}
.banner{background:#fff3cd;border:2px solid #e0a800;padding:.8em 1em;font-weight:bold;font-size:1.1em}
img{max-width:100%}pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}
figcaption{font-size:12px;color:#555}"""


def cell_text(value) -> str:
    """A table cell's text: a missing value (None) reads as an em dash, never as "None"."""
    return "—" if value is None else str(value)


def _cell(value) -> str:
    # A table cell holds one line, and a '|' in it (compiler output does that) would end the cell.
    return cell_text(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: list[tuple], figures_dir: Path) -> str:
    out = []
    for block in doc:
        kind = block[0]
        if kind == "h":
            out.append("#" * block[1] + " " + block[2])
        elif kind == "p":
            out.append(block[1])
        elif kind == "banner":
            out.append(f"> **{block[1]}**")
        elif kind == "table":
            headers, rows = block[1], block[2]
            out.append("\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                                 + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]))
        elif kind == "figure":
            figures_dir.mkdir(parents=True, exist_ok=True)
            (figures_dir / f"{block[1]}.png").write_bytes(block[2])
            out.append(f"![{block[3]}]({figures_dir.name}/{block[1]}.png)\n\n*{block[3]}*")
        elif kind == "pre":
            out.append("```\n" + block[1].rstrip() + "\n```")
    return "\n\n".join(out) + "\n"


def to_html(doc: list[tuple], title: str) -> str:
    e = html.escape
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
           f"<style>{CSS}</style></head><body>"]
    for block in doc:
        kind = block[0]
        if kind == "h":
            out.append(f"<h{block[1]}>{e(block[2])}</h{block[1]}>")
        elif kind == "p":
            out.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "banner":
            out.append(f"<div class='banner'>{e(block[1])}</div>")
        elif kind == "table":
            head = "".join(f"<th>{e(str(h))}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{e(cell_text(c))}</td>" for c in row) + "</tr>" for row in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "figure":
            data = base64.b64encode(block[2]).decode()
            out.append(f"<figure><img alt='{e(block[3])}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{e(block[3])}</figcaption></figure>")
        elif kind == "pre":
            out.append(f"<pre>{e(block[1])}</pre>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _inline(text: str) -> str:
    # Paragraphs are plain text with `code` spans; nothing else of Markdown is needed here.
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

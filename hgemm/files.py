"""Files written whole or not at all, and content hashes: what every layer above writes its results with.

A reader never sees a half-written file: the text goes to a temporary file in the same folder, which
then replaces the target in one rename.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


class UnreadableFile(ValueError):
    """A file a user named cannot be read as text; the message is one line that names it."""


def read_user_text(path: str | os.PathLike, kind: str = "file") -> str:
    """The text of a file a user named, or UnreadableFile saying why not ("no such grid file", "not a
    UTF-8 text file", ...): user input ends in one line, never a traceback."""
    try:
        if str(path).endswith(".gz"):  # committed results files too large to keep uncompressed
            with gzip.open(path, "rt") as f:
                return f.read()
        return Path(path).read_text()
    except (gzip.BadGzipFile, EOFError):
        raise UnreadableFile(f"{path}: not a gzip file") from None
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such {kind}") from None
    except IsADirectoryError:
        raise UnreadableFile(f"{path}: is a folder, not a {kind}") from None
    except UnicodeDecodeError:
        raise UnreadableFile(f"{path}: not a UTF-8 text file") from None
    except OSError as e:
        raise UnreadableFile(f"{path}: cannot read: {e.strerror}") from None


def config_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_report(path: str | os.PathLike, data: Any, markdown: str) -> None:
    """An offline evaluation's results: the JSON at `path`, its Markdown beside it (.md), the Markdown
    printed."""
    write_json(path, data)
    atomic_write_text(Path(path).with_suffix(".md"), markdown)
    print(markdown)

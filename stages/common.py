"""What every stage CLI shares: config loading with overrides, atomic writes, metrics, resume guard.

A stage's `--config FILE` is either that stage's own settings, or a whole experiment config
(configs/default.yaml) from which the section named after the stage is taken. `--set key=value`
overrides single settings (values parsed as YAML, dotted keys reach into nested dicts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def load_stage_config(path: str | os.PathLike, stage: str, overrides: list[str] | None = None) -> dict:
    data = yaml.safe_load(Path(path).read_text()) or {}
    if isinstance(data.get(stage), dict):
        data = data[stage]
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {item!r}")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return data


def build_dataclass(cls: type[T], data: dict, where: str) -> T:
    """Dataclass from a dict, naming unknown keys instead of failing with a bare TypeError."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where}: unknown setting(s) {unknown}; known: {sorted(names)}")
    return cls(**data)


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


def write_metrics(out_dir: str | os.PathLike, metrics: dict) -> None:
    """metrics.json is written last: its presence means the stage finished."""
    write_json(Path(out_dir) / "metrics.json", metrics)


def guard_resume(work_dir: str | os.PathLike, cfg: dict) -> bool:
    """Record the config hash in work_dir; True when resumable state for the same config exists.

    A work dir left by a different config is refused loudly rather than silently mixed in."""
    work_dir = Path(work_dir)
    stamp = work_dir / "config_hash.txt"
    h = config_hash(cfg)
    if stamp.exists():
        old = stamp.read_text().strip()
        if old != h:
            raise SystemExit(
                f"{work_dir} holds state from another config (hash {old}, now {h}). "
                f"Delete {work_dir} to start over, or restore the old config to resume."
            )
        return True
    work_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(stamp, h + "\n")
    return False

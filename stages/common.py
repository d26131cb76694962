"""What every stage CLI shares: config loading with overrides, atomic writes, metrics, resumable work
state and outputs published whole.

A stage's `--config FILE` is either that stage's own settings, or a whole experiment config
(configs/default.yaml) from which the section named after the stage is taken. `--set key=value`
overrides single settings (values parsed as YAML, dotted keys reach into nested dicts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
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


# ------------------------------------------------------------------------------ resumable work state
#
# A training stage keeps checkpoints in its work folder, stamped with a resume key: the stage's
# settings and the content of the inputs it reads. A run resumes only from an unfinished run of the
# same key. Anything else (another key, no stamp, or a run that finished and published its outputs,
# so that running the stage again is a rerun) is moved aside and the run starts from scratch.

STAMP = "resume.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

# What identifies an input folder by content: weights, model and tokenizer configs, dataset shards,
# a kernel library's table and kernels. Logs, samples and metrics are left out: they differ between
# runs that read the same input.
IDENTITY_GLOBS = (
    "config.json", "generation_config.json", "*.safetensors", "pytorch_model*.bin",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "dataset_dict.json", "*/*.arrow", "dataset/dataset_dict.json", "dataset/*/*.arrow",
    "table.json", "kernels/*.cu",
)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(path: str | os.PathLike | None) -> str | None:
    """Content hash of an input: a file's bytes, or a folder's identity files (IDENTITY_GLOBS) by
    relative name and content. None for a path that does not exist (e.g. a hub model id)."""
    if path is None:
        return None
    path = Path(path)
    if path.is_file():
        return _file_digest(path)[:16]
    if not path.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted({f for g in IDENTITY_GLOBS for f in path.glob(g) if f.is_file()}):
        h.update(f"{f.relative_to(path).as_posix()}\0{_file_digest(f)}\n".encode())
    return h.hexdigest()[:16]


def resume_key(settings: dict, inputs: dict[str, str | os.PathLike | None]) -> dict:
    """What a stage's checkpoints depend on: its settings (less those that do not change what a
    checkpoint means) and the content of each input it reads."""
    return {"settings": settings, "inputs": {name: fingerprint(path) for name, path in inputs.items()}}


def last_checkpoint(work_dir: str | os.PathLike) -> Path | None:
    """The highest-numbered checkpoint-N folder (what the Trainer resumes from), or None."""
    work_dir = Path(work_dir)
    found = [(int(m.group(1)), p) for p in work_dir.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))] \
        if work_dir.is_dir() else []
    return max(found)[1] if found else None


def read_stamp(work_dir: str | os.PathLike) -> dict | None:
    path = Path(work_dir) / STAMP
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(work_dir: Path, key_hash: str, key: dict, finished: bool) -> None:
    write_json(work_dir / STAMP, {"hash": key_hash, "finished": finished, "key": key})


def resumes(stamp: dict | None, key: dict) -> bool:
    """Whether state stamped `stamp` may be resumed by a run of `key`: same key, never finished."""
    return bool(stamp) and stamp.get("hash") == config_hash(key) and not stamp.get("finished")


def why_stale(stamp: dict | None, key: dict) -> str:
    """One phrase: why state stamped `stamp` is not resumed by a run of `key`."""
    if not stamp:
        return "state without a resume stamp"
    if stamp.get("finished") and stamp.get("hash") == config_hash(key):
        return "a finished run (running the stage again trains again)"
    old = stamp.get("key") or {}
    changed = [f"{part}.{name}" for part in ("settings", "inputs")
               for name in sorted(set(old.get(part) or {}) | set(key.get(part) or {}))
               if (old.get(part) or {}).get(name) != (key.get(part) or {}).get(name)]
    return f"state of other settings or inputs ({', '.join(changed) or 'resume key'} changed)"


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def prepare_work_dir(work_dir: str | os.PathLike, key: dict, wait_s: float = 600.0) -> bool:
    """Leave work_dir holding state of `key` only; True when it holds an unfinished run of that key to
    resume (its last checkpoint, if any, is where training continues). Says what it did in one line.

    Stale state with a checkpoint is moved aside to <work_dir>.previous (replacing what was there);
    stale state without one is removed. State moved aside earlier comes back when it resumes this key
    and work_dir has no checkpoint: a run with a mistyped setting that failed early does not cost the
    run before it its checkpoints. Under torchrun rank 0 decides and the other ranks wait for its stamp."""
    work = Path(work_dir)
    if _rank() != 0:
        return _wait_for_stamp(work, key, wait_s)
    stamp = read_stamp(work)
    if resumes(stamp, key):
        ckpt = last_checkpoint(work)
        print(f"{work}: " + (f"resuming from {ckpt.name}, same config and inputs" if ckpt else
                             "no checkpoint yet, training from the start (same config and inputs)"), flush=True)
        return True
    previous = work.with_name(work.name + ".previous")
    if resumes(read_stamp(previous), key) and last_checkpoint(previous) and not last_checkpoint(work):
        shutil.rmtree(work, ignore_errors=True)
        os.replace(previous, work)
        print(f"{work}: resuming from {last_checkpoint(work).name} set aside in {previous}, same config and inputs",
              flush=True)
        return True
    if last_checkpoint(work):
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(work, previous)
        print(f"{work} held {why_stale(stamp, key)}: moved aside to {previous}; training from the start", flush=True)
    else:
        if work.exists():
            shutil.rmtree(work)
        print(f"{work}: training from the start", flush=True)
    work.mkdir(parents=True, exist_ok=True)
    _write_stamp(work, config_hash(key), key, finished=False)
    return False


def _wait_for_stamp(work: Path, key: dict, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while not resumes(read_stamp(work), key):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{work}: rank {_rank()} waited {wait_s:.0f} s for rank 0 to prepare it")
        time.sleep(1.0)
    return True


def staging_dir(out_dir: str | os.PathLike) -> Path:
    """An empty folder beside out_dir for a stage to write its outputs into; `publish` swaps it in,
    so out_dir keeps the previous outputs whole until the new ones are complete (a failed run leaves
    them as they were). Under torchrun only rank 0 clears it; every rank gets the same path."""
    staged = Path(f"{Path(out_dir)}.partial")
    if _rank() == 0:
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
    return staged


def publish(staged: str | os.PathLike, out_dir: str | os.PathLike, work_dir: str | os.PathLike | None = None) -> None:
    """Swap the staged outputs in for out_dir's, then stamp work_dir's run finished. In that order: a
    crash between the two leaves an unfinished run whose last checkpoint a rerun reuses."""
    out, old = Path(out_dir), Path(f"{Path(out_dir)}.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        os.replace(out, old)
    os.replace(staged, out)
    shutil.rmtree(old, ignore_errors=True)
    if work_dir is not None:
        stamp = read_stamp(work_dir)
        if stamp:
            _write_stamp(Path(work_dir), stamp["hash"], stamp["key"], finished=True)

"""What every stage CLI shares: config loading with overrides, metrics, resumable work state and
outputs published whole (atomic writes: hgemm/files.py).

A stage's `--config FILE` is either that stage's own settings, or a whole experiment config
(configs/default.yaml) from which the section named after the stage is taken. Several `--config`
files are laid over one another in order, nested keys merged, as Snakemake lays `--configfile` over
configs/default.yaml: `--config configs/default.yaml --config configs/smoke.yaml`. `--set key=value`
overrides single settings (values parsed as YAML, dotted keys reach into nested dicts).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
import typing
from pathlib import Path
from typing import Sequence, TypeVar

import yaml

from hgemm.files import atomic_write_text, config_hash, write_json  # noqa: F401  (the stages write with these)

SCHEMA = Path(__file__).resolve().parent.parent / "configs" / "schema.yaml"
T = TypeVar("T")


def load_schema(path: str | os.PathLike = SCHEMA) -> dict:
    """configs/schema.yaml: every stage's settings (stages.config_schema validates against it)."""
    return yaml.safe_load(Path(path).read_text())


def merge_config(base: dict, over: dict) -> dict:
    """`over` laid over `base`: nested mappings merge key by key, anything else is replaced (Snakemake's rule)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merge_config(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) \
            else copy.deepcopy(value)
    return out


def _schema_keys(stage: str) -> tuple[set[str], set[str]]:
    """(the top-level keys of an experiment config, the keys of the stage's section), from the schema."""
    properties = load_schema()["properties"]
    return set(properties), set(properties.get(stage, {}).get("properties", {}))


def stage_section(data: dict, stage: str) -> dict:
    """The stage's settings in one config file: its section of a whole experiment config (empty when the
    file names other stages only), or the whole file when it holds that stage's settings alone."""
    if stage in data:
        return data[stage] if isinstance(data[stage], dict) else {}
    experiment, own = _schema_keys(stage)
    return {} if set(data) & experiment and not set(data) <= own else data


def load_stage_config(paths: str | os.PathLike | Sequence[str | os.PathLike], stage: str,
                      overrides: list[str] | None = None) -> dict:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    data: dict = {}
    for path in paths:
        data = merge_config(data, stage_section(yaml.safe_load(Path(path).read_text()) or {}, stage))
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
    """A settings dataclass from a dict, a field whose type is a dataclass from the nested dict; an
    unknown or a missing setting is a ValueError naming it, never a bare TypeError. The settings
    dataclasses hold no defaults: every value comes from the config (configs/default.yaml and what is
    laid over it)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping of settings, got {type(data).__name__}")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where}: unknown setting(s) {unknown}; known: {sorted(names)}")
    missing = [f.name for f in fields if f.name not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{where}: missing setting(s) {missing} (a stage reads configs/default.yaml with any "
                         "override files after it: --config configs/default.yaml --config FILE)")
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve at run time: no nested settings to build
        hints = {}
    return cls(**{k: build_dataclass(hints[k], v, f"{where}.{k}") if dataclasses.is_dataclass(hints.get(k)) else v
                  for k, v in data.items()})


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


class TrainingJob(typing.Protocol):
    """What a training stage hands `run_training`: a library object that has checked its settings and
    inputs (a bad value fails before the work dir is touched) and knows what its checkpoints depend on."""

    resume_settings: dict  # the settings a checkpoint depends on
    resume_inputs: dict  # input name -> path, hashed by content (fingerprint)

    def run(self, out: Path, resumable: bool) -> dict | None:
        """Train (resuming when `resumable`), write the outputs into `out`; the metrics, or None on a
        rank other than 0."""


def run_training(job: TrainingJob, work_dir: str | os.PathLike, out_dir: str | os.PathLike) -> dict | None:
    """A training stage's run around its library call: the work dir prepared for the job's resume key,
    the outputs written into a staging folder, metrics.json last, then the folder swapped in for
    out_dir and the run stamped finished. Returns the metrics (None on ranks other than 0)."""
    resumable = prepare_work_dir(work_dir, resume_key(job.resume_settings, job.resume_inputs))
    out = staging_dir(out_dir)  # swapped in for out_dir at the end: a failed run leaves the old outputs whole
    metrics = job.run(out, resumable)
    if metrics is not None:
        write_metrics(out, metrics)
        publish(out, out_dir, work_dir)
    return metrics

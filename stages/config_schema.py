"""Configs checked against configs/schema.yaml, every failure told in one line naming file and key.

Two callers: the Snakefile validates the merged experiment config before it builds the DAG
(`validate_config`), and a stage validates its own section before it touches its outputs
(`load_settings`). Both end with `SystemExit("<file>: <key path>: <what>")`, e.g.

    configs/smoke.yaml: rl_hgemm.grpo: unknown key 'max_stepz' (did you mean 'max_steps'?)

A config value is user input: none of these failures is a bug, so none prints a traceback.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Iterable, TypeVar

import yaml
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from hgemm.files import UnreadableFile, read_user_text
from hgemm.problem import yaml_error

from stages.common import build_dataclass, load_schema, load_stage_config

T = TypeVar("T")


def key_path(parts: Iterable) -> str:
    """rl_hgemm.grpo.max_steps, sample.baselines[1]"""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _unknown_keys(error: ValidationError) -> list[str]:
    known = error.schema.get("properties", {})
    return sorted(k for k in error.instance if k not in known)


def describe(error: ValidationError) -> str:
    """One line: where in the config, and what is wrong there."""
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        unknown = _unknown_keys(error)
        shown = unknown[:4]  # a whole experiment config given as one stage's section has a dozen
        known = list(error.schema.get("properties", {}))
        hints = [m for k in shown for m in difflib.get_close_matches(k, known, n=1)]
        what = (f"unknown key{'s' if len(unknown) > 1 else ''} " + ", ".join(repr(k) for k in shown)
                + (f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else "")
                + (f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""))
    elif error.validator == "not" and error.schema.get("description"):
        # jsonschema's message for `not` quotes the schema; the description says why the value is refused
        what = f"{error.instance!r}: {error.schema['description']}"
    else:
        what = " ".join(error.message.split())
        if len(what) > 300:  # a message quoting a whole section is no help past its start
            what = what[:297] + "..."
    return f"{where}: {what}" if where else what


def first_error(data: Any, schema: dict) -> tuple[ValidationError | None, int]:
    """The most relevant schema violation (jsonschema's best_match) and how many there are in all."""
    errors = list(Draft202012Validator(schema).iter_errors(data))
    return (best_match(errors) if errors else None), len(errors)


def _one_line(error: ValidationError, count: int, where: str) -> str:
    more = f" (and {count - 1} more problem{'s' if count > 2 else ''})" if count > 1 else ""
    return f"{where}: {describe(error)}{more}"


def _holds(data: Any, parts: list) -> bool:
    for p in parts:
        if isinstance(data, dict) and p in data:
            data = data[p]
        elif isinstance(data, list) and isinstance(p, int) and p < len(data):
            data = data[p]
        else:
            return False
    return True


def _display(path: str | os.PathLike) -> str:
    """A path as the user would type it: relative to the working folder where it lies inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def source_file(error: ValidationError, sources: list[tuple[str, Any]]) -> str:
    """The config file the offending key came from: the last (strongest) source that holds it."""
    parts = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        unknown = _unknown_keys(error)
        parts += unknown[:1]
    for depth in range(len(parts), -1, -1):
        for name, data in reversed(sources):
            if _holds(data, parts[:depth]) and (depth or data):
                return name
    return "config"


def config_sources(workflow) -> tuple[list[str], dict]:
    """A Snakemake workflow's config files, weakest first, and its --config overrides. The Snakefile's
    own `configfile:` files are laid down first and the command line's --configfile files over them
    (workflow.configfiles lists the latter first), then --config."""
    cli = [str(f) for f in workflow.overwrite_configfiles]
    own = [str(f) for f in workflow.configfiles if str(f) not in cli]
    return own + cli, dict(workflow.config_settings.config or {})


def validate_config(config: dict, schema_path: str | os.PathLike, files: list[str] = (),
                    overrides: dict | None = None) -> None:
    """The merged experiment config against the schema; SystemExit with one line naming the file that
    set the offending key. files: the config files merged, weakest first; overrides: --config."""
    error, count = first_error(config, load_schema(schema_path))
    if error is None:
        return
    sources = [(_display(f), yaml.safe_load(Path(f).read_text()) or {}) for f in files]
    if overrides:
        sources.append(("--config", overrides))
    raise SystemExit(_one_line(error, count, source_file(error, sources)))


class ConfigError(ValueError):
    """A stage's settings are unusable; the message is the one line to print."""


def section_schema(stage: str, schema: dict | None = None) -> dict:
    """The schema of one stage's section, on its own (a missing setting is build_dataclass's to name)."""
    schema = schema or load_schema()
    section = {k: v for k, v in schema["properties"][stage].items() if k != "required"}
    return {"$defs": schema.get("$defs", {}), "type": "object", "additionalProperties": False,
            "properties": {stage: section}}


def check_section(stage: str, data: dict, where: str) -> None:
    error, count = first_error({stage: data}, section_schema(stage))
    if error is not None:
        raise ConfigError(_one_line(error, count, where))


def _read_yaml(path: str) -> None:
    """Raise ConfigError for a config file that is missing, unreadable or not YAML."""
    try:
        data = yaml.safe_load(read_user_text(path, "config file"))
    except UnreadableFile as e:
        raise ConfigError(str(e)) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: {yaml_error(e)}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a mapping of settings, got {type(data).__name__}")


def load_settings(cls: type[T], stage: str, paths: str | list[str], overrides: list[str] = (), prog: str = "") -> T:
    """A stage's settings dataclass from its --config files (laid over one another in order) and --set,
    checked against its schema section first; any user error ends the stage with one line:
    `<prog>: <files>: <key>: <what>`."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    try:
        for path in paths:
            _read_yaml(str(path))
        where = " + ".join(map(str, paths))
        try:
            data = load_stage_config(paths, stage, list(overrides))
        except ValueError as e:  # a --set item without '='
            raise ConfigError(f"{where}: {e}") from None
        where += " with --set" if overrides else ""
        check_section(stage, data, where)
        try:
            return build_dataclass(cls, data, f"{where}: {stage}")
        except ValueError as e:  # a missing setting, or a dataclass's own check of its values (__post_init__)
            raise ConfigError(str(e) if str(e).startswith(where) else f"{where}: {stage}: {e}") from None
    except ConfigError as e:
        raise SystemExit(f"{prog}: {e}" if prog else str(e)) from None

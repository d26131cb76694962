"""Settings dataclasses built the way a stage builds them: from configs/default.yaml (with
configs/smoke.yaml laid over it for smoke=True) and a test's own changes on top. The settings
dataclasses hold no defaults, so a test that needs one takes the configs'."""

from __future__ import annotations

from pathlib import Path

from stages.common import build_dataclass, load_stage_config, merge_config

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "configs" / "default.yaml"
SMOKE = ROOT / "configs" / "smoke.yaml"


def config_files(smoke: bool = False) -> list[Path]:
    return [DEFAULT, SMOKE] if smoke else [DEFAULT]


def section(*keys: str, smoke: bool = False) -> dict:
    """A stage's section (keys[0]) or a subsection of it, as the stage reads it."""
    data = load_stage_config(config_files(smoke), keys[0])
    for key in keys[1:]:
        data = data[key]
    return data


def settings(cls, *keys: str, smoke: bool = False, **changes):
    """cls from the section at keys, with `changes` laid over it (nested dicts merge)."""
    return build_dataclass(cls, merge_config(section(*keys, smoke=smoke), changes), ".".join(keys))

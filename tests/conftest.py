"""Shared test setup: GPU tests run only where a GPU and the GPU stack are present."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    if not shutil.which("nvidia-smi"):
        return "no GPU: nvidia-smi not found"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"no GPU: nvidia-smi failed ({e})"
    if "GPU " not in out:
        return "no GPU listed by nvidia-smi"
    for mod in ("pycuda", "cupy", "torch"):
        if importlib.util.find_spec(mod) is None:
            return f"GPU present but {mod} is not installed (pip install -e '.[gpu]')"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cubin_cache(tmp_path_factory):
    # tests must not depend on (or pollute) a user's compile cache
    os.environ.setdefault("HGEMM_CACHE", str(tmp_path_factory.mktemp("cubin-cache")))
    yield


def read_kernel(rel: str) -> str:
    return (ROOT / rel).read_text()


def write_library(folder: Path, kernels: dict[str, str], entries: dict[str, str], fallback: str) -> Path:
    """A library folder as `hgemm tune` writes it: kernels/<name>.cu and a table mapping problem keys
    to kernel names, for dispatch tests."""
    import json

    (folder / "kernels").mkdir(parents=True, exist_ok=True)
    for name, text in kernels.items():
        (folder / "kernels" / f"{name}.cu").write_text(text)
    table = {"fallback": fallback, "entries": {key: {"kernel": name} for key, name in entries.items()}}
    (folder / "table.json").write_text(json.dumps(table))
    return folder

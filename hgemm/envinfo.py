"""The environment every results file records: GPU, driver, CUDA, clocks at start, package versions."""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import shutil
import socket
import subprocess

from .compile import nvcc_version

PACKAGES = ("torch", "cupy-cuda13x", "cupy-cuda12x", "pycuda", "nvmath-python", "cuda-bindings", "triton",
            "transformers", "trl", "datasets", "deepspeed", "numpy", "hgemm-l2")
SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "temperature.gpu", "power.draw", "power.limit", "memory.total", "pstate")


def gpu_info() -> list[dict]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except subprocess.SubprocessError:
        return []
    return [dict(zip(SMI_FIELDS, (v.strip() for v in line.split(",")))) for line in out.strip().splitlines() if line]


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(timing_method: str | None = None) -> dict:
    env = {
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nvcc": nvcc_version(),
        "gpus": gpu_info(),
        "packages": package_versions(),
        "git_commit": git_commit(),
    }
    try:
        import torch  # for its CUDA version only; the rest of this record needs no torch

        env["torch_cuda"] = torch.version.cuda
    except ImportError:
        pass
    if timing_method:
        env["timing_method"] = timing_method
    return env

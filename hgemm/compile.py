"""Candidate source to cubin with nvcc, cached on disk by content hash, with the ptxas resource report.

Compilation is the only thing a CPU-only machine can do with a candidate, so it is complete on its
own: it reports registers, static shared memory, spills and stack frame, and a compile result is a
classified value, never an exception.

The compiler sees the project's device headers (INCLUDE_DIR, `#include <hgemm/...>`) and CUDA's own,
nothing else of the machine: the candidate is compiled alone in a scratch folder, with no include path
from the environment, and hgemm.candidate rejects any other include before it gets here. The cache key
holds a hash of the header files, so editing a header recompiles the kernels that may use it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .candidate import INCLUDE_DIR, Candidate

try:
    import nvidia  # namespace package of the PyPI CUDA wheels (nvidia-cuda-nvcc, ...), where installed
except ImportError:
    nvidia = None

DEFAULT_ARCH = "sm_90a"  # the H200 this project targets; used when no GPU can be asked
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo")
COMPILE_TIMEOUT_S = 120.0
# nvcc compiles every candidate as this file in a scratch folder, so its errors (cached by content,
# whatever file the text came from) name it; name_source() puts the user's file name in their place.
SOURCE_NAME = "kernel.cu"
_SOURCE_REF = re.compile(r"(?<![\w/.-])" + re.escape(SOURCE_NAME) + r"(?!\w)")
CACHE_VERSION = "4"  # bump when the cached metadata (e.g. the ptxas parse) or the key's parts change
# Environment variables through which nvcc or the host preprocessor would add include paths or flags.
_ENV_LEAKS = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")


@dataclass
class Resources:
    registers: int = 0
    smem_static: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    barriers: int = 0
    gmem: int = 0  # module-scope __device__ variables: state that outlives a launch


@dataclass
class CompileResult:
    ok: bool
    arch: str
    layout: str
    key: str
    cubin_path: str | None = None
    resources: Resources = field(default_factory=Resources)
    error: str = ""
    seconds: float = 0.0
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def find_cuda_tool(name: str) -> str | None:
    """A CUDA toolkit executable (nvcc, nvdisasm, ...) from PATH, CUDA_HOME, or the PyPI nvidia-cuda-*
    packages, in that order."""
    found = shutil.which(name)
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and Path(root, "bin", name).exists():
            return str(Path(root, "bin", name))
    for base in nvidia.__path__ if nvidia is not None else ():
        for cand in Path(base).glob(f"*/bin/{name}"):
            return str(cand)
    return None


def find_nvcc() -> str | None:
    return find_cuda_tool("nvcc")


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    nvcc = find_nvcc()
    if not nvcc:
        return "none"
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1]


@functools.lru_cache(maxsize=1)
def detect_arch() -> str:
    """The arch to build for: HGEMM_ARCH, else the visible GPU's (sm_90 -> sm_90a), else DEFAULT_ARCH."""
    env = os.environ.get("HGEMM_ARCH")
    if env:
        return env
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.split()
            if out:
                major, minor = out[0].strip().split(".")
                arch = f"sm_{major}{minor}"
                # wgmma/setmaxnreg need the arch-specific target on Hopper
                return arch + "a" if arch == "sm_90" else arch
        except (subprocess.SubprocessError, ValueError):
            pass
    return DEFAULT_ARCH


def gencode(arch: str) -> str:
    num = arch.removeprefix("sm_")
    # the -gencode form: the -arch=sm_90a shorthand also runs a plain sm_90 pass that rejects wgmma
    return f"-gencode=arch=compute_{num},code=sm_{num}"


def default_cache_dir() -> Path:
    return Path(os.environ.get("HGEMM_CACHE", Path.home() / ".cache" / "hgemm" / "cubin"))


_FUNC_PROPS = re.compile(r"Function properties for (\w+)\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_USED_LINE = re.compile(r"Used (\d+) registers[^\n]*")
_GMEM = re.compile(r"ptxas info\s*: (\d+) bytes gmem")


def include_hash(include_dir: str | os.PathLike = INCLUDE_DIR) -> str:
    """A hash of every file under the include directory (relative path and content), so that a
    cached cubin is only reused with the headers it was compiled against."""
    h = hashlib.sha256()
    root = Path(include_dir)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def nvcc_command(nvcc: str, flags: list[str], include_dir: str | os.PathLike, src: Path, out: Path) -> list[str]:
    """The nvcc command line for one candidate: its flags plus the device headers' include path."""
    return [nvcc, "-cubin", *flags, "-I", str(include_dir), "-o", str(out), str(src)]


def _compile_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _ENV_LEAKS}


def parse_ptxas_report(text: str, entry: str) -> Resources | None:
    """Resources of `entry` from `-Xptxas -v` output; None when ptxas compiled no such entry."""
    res = None
    for chunk in re.split(r"(?=ptxas info\s*: Compiling entry function)", text):
        name, used = _ENTRY.search(chunk), _USED_LINE.search(chunk)
        if name and used and name.group(1) == entry:
            line = used.group(0)
            barriers = re.search(r"used (\d+) barriers", line)
            smem = re.search(r"(\d+) bytes smem", line)
            res = Resources(registers=int(used.group(1)), barriers=int(barriers.group(1)) if barriers else 0,
                            smem_static=int(smem.group(1)) if smem else 0)
            break
    if res is None:
        return None
    for m in _FUNC_PROPS.finditer(text):
        if m.group(1) == entry:
            res.stack_frame, res.spill_stores, res.spill_loads = (int(m.group(i)) for i in (2, 3, 4))
    res.gmem = sum(int(m.group(1)) for m in _GMEM.finditer(text))
    return res


def compile_flags(arch: str, layout: str = "NN", extra_flags: tuple[str, ...] = ()) -> list[str]:
    """nvcc flags of one candidate build (the include path aside): the layout is a -D define."""
    flags = list(BASE_FLAGS) + [gencode(arch), "-Xptxas", "-v"] + list(extra_flags)
    if layout == "TN":
        flags.append("-DHGEMM_LAYOUT_TN")
    return flags


def compile_candidate(
    candidate: Candidate,
    layout: str = "NN",
    arch: str | None = None,
    extra_flags: tuple[str, ...] = (),
    cache_dir: str | os.PathLike | None = None,
    timeout: float = COMPILE_TIMEOUT_S,
    include_dir: str | os.PathLike | None = None,
) -> CompileResult:
    """Compile one candidate for one layout. Never raises for a bad kernel: see CompileResult.ok/error.
    include_dir replaces INCLUDE_DIR (tests of edited headers)."""
    arch = arch or detect_arch()
    include_dir = Path(include_dir) if include_dir else INCLUDE_DIR
    flags = compile_flags(arch, layout, extra_flags)
    key = hashlib.sha256("\0".join([CACHE_VERSION, candidate.source, *flags, nvcc_version(),
                                    include_hash(include_dir)]).encode()).hexdigest()[:24]
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    cubin, meta = cache / f"{key}.cubin", cache / f"{key}.json"
    if meta.exists():
        data = json.loads(meta.read_text())
        if data["ok"] and not cubin.exists():
            pass  # cubin lost (cache cleaned): fall through and rebuild
        else:
            data["resources"] = Resources(**data["resources"])
            data["cached"] = True
            return CompileResult(**data)

    nvcc = find_nvcc()
    if nvcc is None:
        return CompileResult(False, arch, layout, key, error="nvcc not found (install the CUDA toolkit or nvidia-cuda-nvcc)")
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hgemm-nvcc-") as tmp:
        src, out = Path(tmp, SOURCE_NAME), Path(tmp, "kernel.cubin")
        src.write_text(candidate.source)
        cmd = nvcc_command(nvcc, flags, include_dir, src, out)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, env=_compile_env())
        except subprocess.TimeoutExpired:
            # not cached: a timeout may be load on the machine rather than the kernel
            return CompileResult(False, arch, layout, key, error=f"compile timed out after {timeout:.0f} s",
                                 seconds=time.perf_counter() - t0)
        seconds = time.perf_counter() - t0
        # errors name the candidate as SOURCE_NAME and a header as hgemm/<name>, not by machine paths
        log = (proc.stdout + proc.stderr).replace(tmp + "/", "").replace(str(include_dir) + "/", "")
        if proc.returncode != 0 or not out.exists():
            result = CompileResult(False, arch, layout, key, error=_trim(log), seconds=seconds)
        else:
            res = parse_ptxas_report(log, candidate.spec.entry)
            if res is None:
                result = CompileResult(False, arch, layout, key, seconds=seconds,
                                       error=f"no kernel named '{candidate.spec.entry}' in the compiled code "
                                             f"(is it extern \"C\" __global__?)")
            else:
                _atomic_copy(out, cubin)
                result = CompileResult(True, arch, layout, key, str(cubin), res, seconds=seconds)
    fd, tmp_meta = tempfile.mkstemp(dir=cache, prefix=f".{key}.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(result.to_dict()))
    os.replace(tmp_meta, meta)
    return result


def name_source(error: str, name: str) -> str:
    """A compile error with the user's file name where nvcc wrote SOURCE_NAME ("kernel.cu(12): error"
    becomes "mine.cu(12): error"); other file names in it (included headers) are left alone."""
    return _SOURCE_REF.sub(lambda _: name, error)


def _atomic_copy(src: Path, dst: Path) -> None:
    """Copy then rename: concurrent compiles of one key (threads or processes) each publish a whole
    file, and the last rename wins harmlessly. The temporary name is unique per call."""
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.stem}.", suffix=dst.suffix)
    os.close(fd)
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _trim(log: str, limit: int = 4000) -> str:
    """Keep errors first: the RL prompt and the database store this text."""
    lines = [l for l in log.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    text = "\n".join(errors or lines)
    return text[:limit]

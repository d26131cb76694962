"""hgemm: the measuring instrument (compile, verify and time HGEMM candidates against cuBLAS-class
baselines) and the tuned kernel library (`hgemm.matmul`)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hgemm-l2")  # pyproject.toml's, so a release changes it in one place
except PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "unknown"


def __getattr__(name: str):
    if name == "matmul":
        # deferred: hgemm.ops imports torch and registers torch.ops.hgemm; the instrument needs neither
        from .ops import matmul

        return matmul
    raise AttributeError(f"module 'hgemm' has no attribute {name!r}")

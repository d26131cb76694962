"""hgemm: the measuring instrument (compile, verify and time HGEMM candidates against cuBLAS-class
baselines) and the tuned kernel library (`hgemm.matmul`)."""

from importlib.metadata import PackageNotFoundError, version

from .library import matmul  # noqa: F401  (CPU-safe import; CUDA loads on first call)

try:
    __version__ = version("hgemm-l2")  # pyproject.toml's, so a release changes it in one place
except PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "unknown"

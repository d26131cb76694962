"""hgemm: the measuring instrument (compile, verify and time HGEMM candidates against cuBLAS-class
baselines) and the tuned kernel library (`hgemm.matmul`)."""

from .library import matmul  # noqa: F401  (CPU-safe import; CUDA loads on first call)

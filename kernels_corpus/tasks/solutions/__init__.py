"""Reference candidates (CUDA + launch spec) for the general-kernel tasks; a package only so that
setuptools ships the .cu files with kernels_corpus.tasks."""

"""labkit: a lab workbook for deep-learning systems (graphs, quantization, pruning, search, kernels)."""
from .training.determinism import ensure_cublas_config as _ensure_cublas_config

_ensure_cublas_config()  # before any CUDA work: cuBLAS reads it when CUDA starts

__version__ = "0.1.0"


def __getattr__(name):
    # `from labkit import check` (the exercises' check) without importing every lab's exercises at `import labkit`
    if name == "check":
        from .exercises import check
        return check
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")

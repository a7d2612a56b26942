"""labkit: a lab workbook for deep-learning systems (graphs, quantization, pruning, search, kernels)."""
from .training.determinism import ensure_cublas_config as _ensure_cublas_config

_ensure_cublas_config()  # before any CUDA work: cuBLAS reads it when CUDA starts

__version__ = "0.1.0"

"""labkit: a lab workbook for deep-learning systems (graphs, quantization, pruning, search, kernels)."""
__version__ = "0.1.0"

"""MXINT8 kernels: the CuTe dequantization kernel as a PyTorch custom op (``extension``), a fused MXINT8
weight-only linear (Triton, ``fused_linear``), a packed MXINT8 Linear layer, and memory accounting. Every one
matches the pure-PyTorch reference that defines the format's values (``labkit.quant.formats.mxint``, handed
on here as ``quantize_mxint8``, ``dequantize_mxint8``, ``fake_quantize_mxint8``).

Importing this package builds nothing: the CUDA extension loads on first use (or ``labkit ext build``).
"""
from ..quant.formats.mxint import dequantize_mxint8, fake_quantize_mxint8, quantize_mxint8
from .dequant import MXINT8ReferenceWarning, dequantize
from .fused_linear import mxint8_linear
from .packed_linear import MXINT8FusedFallbackWarning, MXINT8Linear, convert_to_mxint8, exclude

__all__ = ["MXINT8FusedFallbackWarning", "MXINT8Linear", "MXINT8ReferenceWarning", "convert_to_mxint8",
           "dequantize", "dequantize_mxint8", "exclude", "fake_quantize_mxint8", "mxint8_linear", "quantize_mxint8"]

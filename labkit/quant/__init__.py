"""Quantization: number formats, the quantized Linear, the ``quantize`` transform and bit accounting."""
from .bits import average_bits
from .config import LinearQuantConfig
from .formats import FORMATS, IntegerFormat, NumberFormat, make_format
from .linear import QuantLinear
from .transform import TransformResult, quantize, set_qat_matmul

__all__ = ["average_bits", "LinearQuantConfig", "FORMATS", "IntegerFormat", "NumberFormat", "make_format",
           "QuantLinear", "TransformResult", "quantize", "set_qat_matmul"]

"""Quantization: number formats, the quantized Linear, the ``quantize`` transform, bit accounting, and the
course's fixed-point config (``fixed_point``); ``compress`` quantizes then prunes."""
from .bits import average_bits
from .config import LinearQuantConfig, fixed_point
from .formats import FORMATS, IntegerFormat, NumberFormat, make_format
from .linear import QuantLinear
from .transform import TransformResult, quantize, set_qat_matmul

__all__ = ["average_bits", "LinearQuantConfig", "FORMATS", "IntegerFormat", "NumberFormat", "make_format",
           "QuantLinear", "TransformResult", "fixed_point", "quantize", "set_qat_matmul"]

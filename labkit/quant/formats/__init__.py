"""Registered number formats. Importing this package registers every format module below."""
from .base import FORMATS, NumberFormat, Quantizer, make_format, register
from .integer import IntegerFormat

__all__ = ["FORMATS", "NumberFormat", "Quantizer", "make_format", "register", "IntegerFormat"]

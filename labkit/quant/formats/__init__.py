"""Registered number formats. Importing this package registers every format module below."""
from .base import FORMATS, NumberFormat, Quantizer, make_format, register
from .integer import IntegerFormat
from .minifloat import MinifloatDenorm, MinifloatIEEE
from .log import LogFormat
from .block import BlockFP, BlockLog, BlockMinifloat
from .binary import BinaryFormat, BinaryScalingFormat, ResidualSignFormat
from .mxint import MXInt8Format

__all__ = ["FORMATS", "NumberFormat", "Quantizer", "make_format", "register", "IntegerFormat",
           "MinifloatDenorm", "MinifloatIEEE", "LogFormat", "BlockFP", "BlockLog", "BlockMinifloat",
           "BinaryFormat", "BinaryScalingFormat", "ResidualSignFormat", "MXInt8Format"]

"""TEMPORARY: moved."""
from .lab1_quantize import *  # noqa
from .lab1_prune import *  # noqa

"""Readings: the facts each notebook's answers state, computed from its stored numbers (``core``), with every
comparison made by one statistics module (``stats``). ``labkit.readings.<notebook>`` holds a notebook's."""
from .core import VERDICTS, Reading, by_key, by_source, check, compare, compute, mismatches, of_notebook, read, unread_claims

__all__ = ["VERDICTS", "Reading", "by_source", "check", "compare", "compute", "mismatches", "of_notebook",
           "unread_claims"]

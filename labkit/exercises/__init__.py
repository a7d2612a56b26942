"""Exercises: the lab tasks a student implements, each checked on the spot against labkit's own function.

    from labkit.exercises import check
    quantize = check("lab1.fixed_point", quantize).fn   # prints one line per case and "N of M public cases pass"

``labkit check --self-test`` proves every exercise's cases strong: the reference passes, a stub is "not
attempted", every registered mutant (a plausible mistake) fails a case.
"""
from .check import CheckResult, check, evaluate, self_test
from .catalog import for_notebook, get, registry
from .core import Case, Exercise, exercise

__all__ = ["Case", "CheckResult", "Exercise", "check", "evaluate", "exercise", "for_notebook", "get", "registry",
           "self_test"]

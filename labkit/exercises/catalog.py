"""Every exercise, by id or by notebook: importing each lab's module (``labkit/exercises/lab<N>.py``, found like
the records) registers its exercises."""
from __future__ import annotations

import importlib
import pkgutil
import re

from .core import REGISTRY, Exercise

LAB_MODULE = re.compile(r"lab\d+")  # lab2_replay, lab4_yours: helpers the exercises use, not exercises


def registry() -> dict[str, Exercise]:
    """Every exercise, importing each lab's module (registration happens at import)."""
    for info in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
        if LAB_MODULE.fullmatch(info.name):
            importlib.import_module(f"{__package__}.{info.name}")
    return dict(REGISTRY)


def get(exercise_id: str) -> Exercise:
    found = registry()
    if exercise_id not in found:
        raise KeyError(f"unknown exercise {exercise_id!r}; allowed: {', '.join(sorted(found))}")
    return found[exercise_id]


def for_notebook(stem: str) -> list[Exercise]:
    return [ex for ex in registry().values() if ex.notebook == stem]

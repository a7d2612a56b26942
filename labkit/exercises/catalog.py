"""Every exercise, by id or by notebook: importing each lab's module registers its exercises."""
from __future__ import annotations

from .core import REGISTRY, Exercise


def registry() -> dict[str, Exercise]:
    """Every exercise, importing each lab's module (registration happens at import)."""
    from . import lab0, lab1, lab2, lab3, lab4  # noqa: F401

    return dict(REGISTRY)


def get(exercise_id: str) -> Exercise:
    found = registry()
    if exercise_id not in found:
        raise KeyError(f"unknown exercise {exercise_id!r}; allowed: {', '.join(sorted(found))}")
    return found[exercise_id]


def for_notebook(stem: str) -> list[Exercise]:
    return [ex for ex in registry().values() if ex.notebook == stem]

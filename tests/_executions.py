"""Notebook executions the tests share, so that no lab notebook's solution edition runs twice in one session: the
browser test runs it in JupyterLab and leaves what it ran here; the notebook's smoke test then checks that run
instead of running the notebook again with papermill (and runs it itself when no browser test ran it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat


@dataclass
class Execution:
    notebook: nbformat.NotebookNode  # the executed notebook, outputs included
    checks: list[dict]               # the exercise checks it logged (LABKIT_CHECK_LOG records)
    saved: list[dict]                # the result JSONs it wrote
    runs: Path                       # its LABKIT_RUNS_DIR (Optuna storage, per-seed results)
    inputs: list[dict] = field(default_factory=list)  # what the lab fed each exercise (LABKIT_RECORD_INPUTS)


def read_inputs(path: Path, notebook: str) -> list[dict]:
    """The recorded calls of ``notebook``'s exercises (``labkit.exercises.inputs``)."""
    import json

    from labkit.exercises import for_notebook

    ids = {ex.id for ex in for_notebook(notebook)}
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["id"] in ids]


EXECUTED: dict[str, Execution] = {}

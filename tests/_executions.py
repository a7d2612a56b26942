"""Notebook executions the tests share, so that no lab notebook's solution edition runs twice in one session: the
browser test runs it in JupyterLab and leaves what it ran here; the notebook's smoke test then checks that run
instead of running the notebook again with papermill (and runs it itself when no browser test ran it)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat


@dataclass
class Execution:
    notebook: nbformat.NotebookNode  # the executed notebook, outputs included
    checks: list[dict]               # the exercise checks it logged (LABKIT_CHECK_LOG records)
    saved: list[dict]                # the result JSONs it wrote
    runs: Path                       # its LABKIT_RUNS_DIR (Optuna storage, per-seed results)


EXECUTED: dict[str, Execution] = {}

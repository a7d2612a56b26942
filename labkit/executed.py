"""The committed executed notebooks (``notebooks/executed/full/``) agree with the answers: their closing cell, which
rendered the answers when the notebook ran, shows them as ``labkit.answers`` words them now from the same stored
numbers (a rule or a wording changed since). Every other output stays as the run printed it.
``python -m labkit.redraw all --answers`` refreshes them (``labkit.redraw.answers_body`` words each closing cell).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import nbformat

from . import records, settings

EXECUTED = settings.REPO_ROOT / "notebooks" / "executed" / "full"
CLOSING = "redraw.close("


def _markdown(text: str):
    """A display of ``text`` as IPython's ``Markdown`` makes it (``labkit.report.say``)."""
    return nbformat.v4.new_output("display_data", data={"text/markdown": text,
                                                        "text/plain": "<IPython.core.display.Markdown object>"})


def refreshed(nb: nbformat.NotebookNode, body: str) -> nbformat.NotebookNode:
    """``nb`` with its closing cell showing ``body`` (its one answers output; the rest of its outputs kept)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        closing = CLOSING in cell.source
        outputs, shown = [], False
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/markdown" not in data:
                outputs.append(out)
            elif closing:
                if not shown:
                    outputs.append(_markdown(body))
                    shown = True
            else:
                outputs.append(out)
        if closing and not shown:
            outputs.append(_markdown(body))
        cell.outputs = outputs
    return nb


def refresh(answers_body: Callable[[str], str], folder: Path = EXECUTED) -> list[Path]:
    """Refresh every executed notebook of ``folder`` that has a record, its closing cell showing
    ``answers_body(notebook)``; returns those it rewrote."""
    written = []
    for notebook in records.records():
        path = Path(folder) / f"{notebook}.ipynb"
        if not path.is_file():
            continue
        text = path.read_text()
        new = nbformat.writes(refreshed(nbformat.reads(text, as_version=4), answers_body(notebook))) + "\n"
        if new != text:
            path.write_text(new)
            written.append(path)
    return written


"""Build notebooks/*.ipynb from their percent-format sources in notebooks/src/*.py.

Sources are plain Python (reviewable diffs); cells start with ``# %%`` (code), ``# %% [markdown]``
(markdown, each line prefixed ``# ``) or ``# %% tags=["parameters"]`` (the papermill parameters cell).
``--check`` exits 1 if a committed notebook differs from its source (used by the tests).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SRC, OUT = ROOT / "notebooks" / "src", ROOT / "notebooks"
HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def parse(text: str) -> nbformat.NotebookNode:
    cells, kind, tags, lines = [], None, [], []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            flush()
            kind = "markdown" if m.group("md") else "code"
            tags = json.loads(m.group("tags")) if m.group("tags") else []
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):  # stable ids keep diffs quiet
        cell["id"] = f"cell-{i}"
    return nb


def render(src: Path) -> str:
    return nbformat.writes(parse(src.read_text())) + "\n"


def main(argv) -> int:
    check = "--check" in argv
    stale = []
    for src in sorted(SRC.glob("lab*.py")):
        target = OUT / f"{src.stem}.ipynb"
        text = render(src)
        if check:
            if not target.is_file() or target.read_text() != text:
                stale.append(target.name)
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print(f"out of date (run python tools/build_notebooks.py): {stale}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Two editions of every lab notebook from one percent-format source (``notebooks/src/*.py``).

Cell roles, given as tags in a cell's header line of the source:

- ``exercise`` (code): a function the student writes; its body between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` becomes ``# YOUR CODE HERE`` + ``raise NotImplementedError`` in the student edition.
- ``check`` (code): ``check("<id>", fn)``, the exercise's public cases; graded, locked.
- ``answer`` (markdown, with ``question=<label> points=<n>`` in the header): a prose answer; the student
  edition holds "YOUR ANSWER HERE".
- ``answer-key`` (either): the rendered answers or the committed results read as the answer; the student
  edition drops the cell.
- ``solution-only`` / ``student-only`` (either): words true of one edition alone (what the other edition's
  cells show); the other edition drops the cell.

Both editions carry nbgrader-compatible cell metadata (``metadata.nbgrader``, schema 3: ids, locked cells, the
written answers' points) and name their notebook and edition (``metadata.labkit``), which ``labkit grade`` reads
to recognise a renamed file; a check cell is locked but not an nbgrader grade cell, since it never fails (grading
is ``labkit grade``'s). The student edition opens with a task map: every sheet task's exercise or question, its
points and its cell.
"""
from __future__ import annotations

import json
import re

import nbformat

HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*?\]))?"
                    r"(?: question=(?P<question>\S+))?(?: points=(?P<points>\d+))?\s*$")
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")
YOUR_ANSWER = "YOUR ANSWER HERE"
CHECK_CALL = re.compile(r"""check\(\s*["'](?P<id>[\w.]+)["']""")
ROLES = ("exercise", "check", "answer", "answer-key")
EDITION_TAGS = ("solution-only", "student-only")
# calls that read or write the key: rendered answers, and the committed full-profile results read as the answer
ANSWER_KEY_CALLS = ("labkit.answers", "save_answers", "answers.render", "redraw.close", "redraw.write_answers",
                    "redraw.render_answers", "redraw.store_readings")


def parse(text: str, stem: str | None = None) -> nbformat.NotebookNode:
    """The solution edition: every cell of the source, roles in ``metadata.tags``; ``stem`` names the notebook."""
    cells, head, lines = [], None, []

    def flush():
        if head is None:
            return
        body = "\n".join(lines).strip("\n")
        if head.group("md"):
            body = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in body.splitlines())
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        tags = json.loads(head.group("tags")) if head.group("tags") else []
        allowed = ROLES + EDITION_TAGS + ("parameters",)
        unknown = [t for t in tags if t not in allowed]
        if unknown:
            raise ValueError(f"cell tags {unknown}: allowed {', '.join(allowed)}")
        if tags:
            cell.metadata["tags"] = tags
        if head.group("question"):
            cell.metadata["question"] = head.group("question")
            cell.metadata["points"] = int(head.group("points") or 1)
        cells.append(cell)

    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            flush()
            head, lines = m, []
        elif line.startswith("# %%"):
            raise ValueError(f"unreadable cell header {line!r}: '# %%', '# %% [markdown]', then optional "
                             "tags=[...], question=<label>, points=<n>")
        elif head is not None:
            lines.append(line)
    flush()
    _grade_metadata(cells)
    return _notebook(cells, {"notebook": stem, "edition": "solution"} if stem else None)


def code_lines(nb: nbformat.NotebookNode) -> int:
    """The lines of code a notebook holds for the lab to run: non-blank, non-comment lines of its code cells,
    not counting exercise solutions (between ``BEGIN`` and ``END``: what a student writes)."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            s = line.strip()
            if s.startswith(BEGIN) or s.startswith(END):
                inside = s.startswith(BEGIN)
            elif s and not s.startswith("#") and not inside:
                count += 1
    return count


def _notebook(cells, labkit: dict | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    if labkit:
        nb.metadata["labkit"] = labkit
    for i, cell in enumerate(nb.cells):  # stable ids keep diffs quiet
        cell["id"] = f"cell-{i}"
    return nb


def role(cell) -> str | None:
    return next((t for t in cell.metadata.get("tags", []) if t in ROLES), None)


def exercise_id(cell) -> str | None:
    m = CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
    return m.group("id") if m else None


def _grade_metadata(cells) -> None:
    """nbgrader's cell roles: an exercise cell is a solution cell, its check cell a locked graded test with
    the exercise's points, an answer cell a manually graded solution cell."""
    from .catalog import get

    pending = None
    for cell in cells:
        r = role(cell)
        if r == "exercise":
            pending = cell
        elif r == "check":
            ex = get(exercise_id(cell) or "")
            if pending is None:
                raise ValueError(f"check cell for {ex.id} has no exercise cell before it")
            pending.metadata["nbgrader"] = _nbgrader(ex.id, solution=True)
            cell.metadata["nbgrader"] = _nbgrader(f"{ex.id}.check", locked=True)
            cell.metadata["exercise"] = ex.id
            cell.metadata["points"] = ex.points
            pending.metadata["exercise"] = ex.id
            pending = None
        elif r == "answer":
            q = cell.metadata.get("question")
            if not q:
                raise ValueError("an answer cell needs question=<label> points=<n> in its header")
            cell.metadata["nbgrader"] = _nbgrader(q, solution=True, grade=True, points=cell.metadata["points"])
    if pending is not None:
        raise ValueError("an exercise cell has no check cell after it")


def _nbgrader(grade_id: str, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id.replace(".", "-"), "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def stub_solution(source: str) -> str:
    """Replace each ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` region with the stub, at its indent."""
    out, inside = [], False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"nested {BEGIN}")
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + s for s in STUB]
            inside = True
        elif stripped == END:
            if not inside:
                raise ValueError(f"{END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN} without {END}")
    return "\n".join(out)


def solution_regions(source: str) -> list[str]:
    """The text inside every solution region (what must never reach a student)."""
    regions, current = [], None
    for line in source.splitlines():
        if line.strip() == BEGIN:
            current = []
        elif line.strip() == END and current is not None:
            regions.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return regions


def _edition(cell) -> str | None:
    return next((t for t in cell.metadata.get("tags", []) if t in EDITION_TAGS), None)


def solution(parsed: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solution edition as written: every cell of the source but those for the student edition alone."""
    cells = [nbformat.from_dict(json.loads(json.dumps(c))) for c in parsed.cells if _edition(c) != "student-only"]
    return _notebook(cells, parsed.metadata.get("labkit"))


def student(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student edition: solutions stubbed, answers blanked, answer-key and solution-only cells dropped, a task
    map first."""
    from .catalog import get

    cells = []
    for cell in solution.cells:
        r = role(cell)
        if r == "answer-key" or _edition(cell) == "solution-only":
            continue
        cell = nbformat.from_dict(json.loads(json.dumps(cell)))
        if r == "exercise":
            if BEGIN not in cell.source:
                raise ValueError(f"exercise cell has no {BEGIN} region:\n{cell.source[:200]}")
            cell.source = stub_solution(cell.source)
        elif r == "answer":
            cell.source = YOUR_ANSWER
        cells.append(cell)
    rows = []
    for i, cell in enumerate(cells, start=2):  # the title cell and the map come first (cells 1 and 2)
        if role(cell) == "exercise":  # the cell the student writes in; its check cell follows
            ex = get(cell.metadata["exercise"])
            rows.append(f"| {_cell(ex.task)} | exercise `{ex.id}`: {_cell(ex.title)} | {ex.points} | {i} |")
        elif role(cell) == "answer":
            rows.append(f"| question {cell.metadata['question']} | your answer | {cell.metadata['points']} | {i} |")
    if rows:
        total = sum(int(r.rsplit("|", 3)[1]) for r in rows)
        task_map = nbformat.v4.new_markdown_cell(
            "## Your tasks\n\nWrite each function where it says `# YOUR CODE HERE`, then run the check cell under "
            "it: it prints one line per public case and how many pass. Until your function passes, the rest of "
            "the notebook uses labkit's own (a one-line note says so), so every cell still runs. Answer each "
            "question where it says YOUR ANSWER HERE, from the numbers your run printed.\n\n"
            "| sheet task | what you write | points | cell |\n| --- | --- | --- | --- |\n"
            + "\n".join(rows) + f"\n\nTotal: {total} points. `labkit check <this notebook>` runs every check "
            "headlessly. Grading runs each exercise cell on its own, with this notebook's imports and further "
            "cases: keep every helper your function needs inside its cell, and do not import labkit there.")
        task_map.metadata["tags"] = ["task-map"]
        cells.insert(1, task_map)
    stem = solution.metadata.get("labkit", {}).get("notebook")
    return _notebook(cells, {"notebook": stem, "edition": "student"} if stem else None)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a Markdown table cell: |x| would end the cell


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"

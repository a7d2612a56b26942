"""A class's submissions and the release they answer.

``release()`` reads the student edition as released: per exercise the function its check cell names, the stub,
the imports of the cells before it (names bound to labkit become tripwires on the graded side), its locked
cells' checksums and its questions. ``collect(folder)`` finds every student's notebooks (one sub-folder per
student, its name the student's id), recognised by their metadata and cells, not their file names.
"""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .. import editions
from ..student import edition_dir

STUDENT_EDITION = edition_dir()
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")


@dataclass(frozen=True)
class ReleasedExercise:
    id: str
    notebook: str
    function: str                    # the name its check cell passes to check()
    stub: str                        # the exercise cell as released
    preamble: tuple[str, ...]        # the imports of the cells before it, labkit's left out
    labkit_names: tuple[str, ...]    # names those cells bind to labkit


@dataclass
class Released:
    """One notebook of the release."""

    stem: str
    path: Path
    exercises: dict[str, ReleasedExercise]
    locked: dict[str, tuple[str, str | None]]     # grade_id -> (checksum, the exercise it checks)
    questions: dict[str, int]                      # question id -> points


def checksum(cell) -> str:
    """A cell's type and source, trailing blanks ignored (as nbgrader's checksum of a locked cell)."""
    text = "\n".join(line.rstrip() for line in cell.source.strip().splitlines())
    return hashlib.sha256(f"{cell.cell_type}\n{text}".encode()).hexdigest()


def _imports(cells) -> tuple[list[str], list[str]]:
    """(import statements not of labkit, names bound to labkit) of the top-level imports of ``cells``."""
    keep, names = [], []
    for cell in cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython magics: no import of labkit's to find there
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "labkit":
                        names.append(alias.asname or alias.name.split(".")[0])
                    else:
                        keep.append(ast.unparse(ast.Import([alias])))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] == "labkit":
                    names += [a.asname or a.name for a in node.names]
                else:
                    keep.append(ast.unparse(node))
    return keep, sorted(set(names))


def _checked_function(source: str, exercise_id: str) -> str:
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == exercise_id and isinstance(node.args[1], ast.Name)):
            return node.args[1].id
    raise ValueError(f"the check cell of {exercise_id} names no function: {source[:80]!r}")


def read_released(path: Path) -> Released:
    nb = nbformat.read(path, as_version=4)
    stem = nb.metadata.get("labkit", {}).get("notebook") or path.stem
    exercises, locked, questions = {}, {}, {}
    stubs = {}
    for i, cell in enumerate(nb.cells):
        role, ex_id = editions.role(cell), cell.metadata.get("exercise")
        grading = cell.metadata.get("nbgrader", {})
        if grading.get("locked"):
            locked[grading["grade_id"]] = (checksum(cell), ex_id)
        if role == "exercise":
            stubs[ex_id] = (i, cell.source)
        elif role == "check":
            first, stub = stubs[ex_id]
            keep, names = _imports(nb.cells[:first])
            exercises[ex_id] = ReleasedExercise(ex_id, stem, _checked_function(cell.source, ex_id), stub,
                                                tuple(keep), tuple(names))
        elif role == "answer":
            questions[cell.metadata["question"]] = int(cell.metadata.get("points", 1))
    return Released(stem, path, exercises, locked, questions)


def release(folder: Path = STUDENT_EDITION) -> dict[str, Released]:
    books = sorted(Path(folder).glob("lab*_*.ipynb"))
    if not books:
        raise FileNotFoundError(f"no student edition at {folder}: run `make notebooks` in the labkit checkout")
    return {r.stem: r for r in map(read_released, books)}


@dataclass
class Submitted:
    stem: str
    path: Path
    nb: nbformat.NotebookNode


@dataclass
class Student:
    id: str
    folder: Path
    notebooks: dict[str, Submitted] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)     # files not graded, and why


def recognise(nb, path: Path, released: dict[str, Released]) -> str | None:
    """Which released notebook ``nb`` is: its metadata, else the exercises its cells name, else its file name."""
    named = nb.metadata.get("labkit", {}).get("notebook") if isinstance(nb.metadata.get("labkit"), dict) else None
    if named in released:
        return named
    owners = {}
    for cell in nb.cells:
        ex_id = cell.get("metadata", {}).get("exercise")
        for stem, rel in released.items():
            if ex_id in rel.exercises:
                owners[stem] = owners.get(stem, 0) + 1
    if owners:
        return max(owners, key=owners.get)
    by_name = [stem for stem in released if stem in path.stem]
    return max(by_name, key=len) if by_name else None


def collect(root: Path, released: dict[str, Released]) -> list[Student]:
    """Every student of ``root`` (its sub-folders), with the notebooks recognised in each."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder of submissions (one sub-folder per student)")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise ValueError(f"{root}: no student folders in it (one sub-folder per student, named by the student's id)")
    bad = [p.name for p in folders if not STUDENT_ID.match(p.name)]
    if bad:
        raise ValueError(f"{root}: student folder names must be ids of letters, digits and ._@+- (got {bad[:5]})")
    students = []
    for folder in folders:
        student = Student(folder.name, folder)
        found: dict[str, list[Submitted]] = {}
        for path in sorted(folder.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception as err:  # noqa: BLE001 (not JSON, not a notebook: listed, and the notebook counts 0)
                student.problems.append(f"{path.relative_to(folder)}: unreadable ({type(err).__name__}: "
                                        f"{str(err).splitlines()[0][:120] if str(err) else ''})")
                continue
            stem = recognise(nb, path, released)
            if stem is None:
                student.problems.append(f"{path.relative_to(folder)}: not one of the lab notebooks")
                continue
            found.setdefault(stem, []).append(Submitted(stem, path, nb))
        for stem, books in found.items():
            books.sort(key=lambda s: (s.path.stat().st_mtime, str(s.path)))
            student.notebooks[stem] = books[-1]
            for other in books[:-1]:
                student.problems.append(f"{other.path.relative_to(folder)}: another copy of {stem}; graded "
                                        f"{books[-1].path.relative_to(folder)} (the newest)")
        students.append(student)
    return students


def exercise_source(nb, ex_id: str) -> tuple[str | None, str]:
    """The student's exercise cell for ``ex_id`` (by its exercise id or nbgrader grade_id), and a note."""
    grade_id = ex_id.replace(".", "-")
    cells = [c for c in nb.cells if c.cell_type == "code" and (
        c.get("metadata", {}).get("exercise") == ex_id and editions.role(c) == "exercise"
        or c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)]
    if not cells:
        return None, "its exercise cell is missing"
    note = f"{len(cells)} cells carry this exercise's id: graded the last" if len(cells) > 1 else ""
    return cells[-1].source, note


def locked_changes(nb, rel: Released) -> dict[str | None, list[str]]:
    """Per exercise (``None``: no exercise), each locked cell of the release edited or deleted here."""
    mine = {}
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id:
            mine[grade_id] = checksum(cell)
    out: dict[str | None, list[str]] = {}
    for grade_id, (digest, ex_id) in rel.locked.items():
        if grade_id not in mine:
            out.setdefault(ex_id, []).append(f"deleted locked cell {grade_id}")
        elif mine[grade_id] != digest:
            out.setdefault(ex_id, []).append(f"edited locked cell {grade_id}")
    return out


def written_answers(nb, rel: Released) -> list[tuple[str, int, str]]:
    """(question id, points, the student's text; '' where unanswered) for each question of the release."""
    texts = {}
    for cell in nb.cells:
        q = cell.get("metadata", {}).get("question")
        if q in rel.questions and cell.cell_type == "markdown":
            texts[q] = cell.source.strip()
    return [(q, pts, "" if texts.get(q, "") in ("", editions.YOUR_ANSWER) else texts[q])
            for q, pts in rel.questions.items()]

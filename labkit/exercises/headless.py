"""``labkit check``: execute notebooks headlessly and report every exercise they hold (formative feedback: grading is
``labkit grade``'s, in processes of its own).

Each notebook runs under papermill (``labkit.run.runner``) with ``$LABKIT_CHECK_LOG`` set, so every ``check()`` its
cells call appends its result there. A cell may run ``cell_timeout`` seconds: one past it (an endless loop) stops
that notebook, and the exercise whose check cell it was is "timed out"; a kernel that dies (``os._exit``, a
segfault, an out-of-memory kill) fails the exercise whose check was running; either way the exercises after it
are "not run", with the reason, and the next notebook is checked. Printed output is capped per cell
(``labkit.run.engine``). ``check.json`` keeps the whole report; paths are checked before anything runs.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .. import settings as _settings
from .check import FAIL, LOG_ENV, NOT_ATTEMPTED, PASS
from .catalog import for_notebook, registry

NOT_RUN, TIMED_OUT = "not run", "timed out"
CELL_TIMEOUT = 300


@dataclass
class NotebookReport:
    notebook: str
    path: str
    executed: str | None
    error: str | None
    exercises: dict[str, dict] = field(default_factory=dict)   # id -> {status, passed, total, ..., why}

    @property
    def ok(self) -> bool:
        return self.error is None and all(e["status"] == PASS for e in self.exercises.values())


def notebooks_in(paths: list[Path]) -> list[Path]:
    """Notebook files named, or the lab notebooks inside named folders; each must be a readable lab notebook."""
    known = {ex.notebook for ex in registry().values()}
    found = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            inside = sorted(p.glob("lab*_*.ipynb"))
            if not inside:
                raise ValueError(f"{p}: no lab notebooks (lab*_*.ipynb) in this folder")
            found += inside
        elif p.is_file() and p.suffix == ".ipynb":
            found.append(p)
        else:
            raise ValueError(f"{p}: not a notebook file or a folder of notebooks")
    for p in found:
        if p.stem not in known:
            raise ValueError(f"{p}: not a lab notebook with exercises; allowed names: {', '.join(sorted(known))}")
        try:
            nbformat.read(p, as_version=4)
        except Exception as err:  # noqa: BLE001 (NotJSONError, a bad schema: named with the file)
            first = str(err).splitlines()[0][:200] if str(err) else ""
            raise ValueError(f"{p}: not a readable notebook ({type(err).__name__}: {first})") from None
    return found


def check_outputs(books: list[Path], json_path: Path, out_dir: Path | None) -> None:
    """Where the report and the executed copies go must be writable, and never where a checked notebook is."""
    json_path = Path(json_path)
    if json_path.is_dir():
        raise ValueError(f"--json {json_path}: a folder; give the report's file name (e.g. check.json)")
    if not json_path.resolve().parent.is_dir():
        raise ValueError(f"--json {json_path}: its folder {json_path.resolve().parent} does not exist")
    if not os.access(json_path.resolve().parent, os.W_OK):
        raise ValueError(f"--json {json_path}: its folder is not writable")
    if out_dir is not None:
        out = Path(out_dir).resolve()
        clash = [b for b in books if b.resolve().parent == out]
        if clash:
            raise ValueError(f"--out {out_dir}: the executed copies would replace the notebooks checked there "
                             f"({clash[0].name}); choose another folder")
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out_dir}: a file, not a folder")


def _stopped_at(executed: str | None, index: int | None) -> tuple[str | None, str]:
    """(the exercise whose check cell was running, "cell [n]") in the executed copy."""
    if executed is None or index is None or not Path(executed).is_file():
        return None, "a cell"
    try:
        nb = nbformat.read(executed, as_version=4)
        cell = nb.cells[index]
    except (Exception, IndexError):  # noqa: BLE001
        return None, f"cell {index + 1}"
    ex_id = cell.metadata.get("exercise") if "check" in cell.metadata.get("tags", []) else None
    return ex_id, f"cell {index + 1}"


def _failure(err: BaseException, timeout: int) -> tuple[str, str]:
    """(the status for the exercise whose check was running, what happened) for an error that stopped a run."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    if isinstance(err, CellTimeoutError):
        return TIMED_OUT, f"ran past {timeout} s (an endless loop?) and was stopped"
    if isinstance(err, DeadKernelError):
        return FAIL, "the kernel died while it ran (os._exit, a segfault or an out-of-memory kill)"
    return FAIL, f"raised {str(err).split(': ', 1)[-1][:300]}"


def run(paths: list[Path], profile: str = "smoke", out_dir: Path | None = None, log=print,
        cell_timeout: int = CELL_TIMEOUT, into: list | None = None) -> list[NotebookReport]:
    """Check each notebook in turn; its report is appended to ``into`` (a list the caller may write out even
    if the run is interrupted) and returned."""
    from ..run import runner

    reports = into if into is not None else []
    keep = out_dir is not None
    out_dir = Path(out_dir or tempfile.mkdtemp(prefix="labkit-check-"))
    try:
        books = notebooks_in(paths)
        names = [b.name for b in books]
        for i, path in enumerate(books):  # two notebooks of one name: their executed copies kept apart
            where = out_dir if names.count(path.name) == 1 else out_dir / f"{i + 1:02d}"
            reports.append(_one(path, profile, where, keep, cell_timeout, log, runner))
    finally:
        if not keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    return reports


def _one(path, profile, out_dir, keep, cell_timeout, log, runner) -> NotebookReport:
    log(f"[labkit] checking {path} (profile {profile})")
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as f:
        log_path = f.name
    error, executed, stuck, why = None, str(out_dir / path.name), None, ""
    try:
        # the kernel papermill starts inherits them; its figures go beside its executed copy, never over the
        # committed results (figures/<lab>/quick/ is committed)
        with _settings.environ({LOG_ENV: log_path, "LABKIT_FIGURES_DIR": str(out_dir / "figures")}):
            runner.run_notebook(path, profile, output_dir=out_dir, progress=False, timeout=cell_timeout)
    except Exception as err:  # noqa: BLE001 (a notebook that stops is reported; the next one is still checked)
        status, what = _failure(err, cell_timeout)
        stuck, where = _stopped_at(executed, getattr(err, "labkit_cell", None))
        why = f"{where} {what}" if stuck is None else f"its check cell ({where}) {what}"
        error = f"the notebook stopped: {why}"
        stuck = (stuck, status, f"its check cell {what}")
    records = []
    for line in Path(log_path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    os.unlink(log_path)
    report = NotebookReport(path.stem, str(path), executed if keep else None, error)
    by_id = {r.get("id"): r for r in records if isinstance(r, dict)}  # a check cell run twice: its last result counts
    for ex in for_notebook(path.stem):
        r = by_id.get(ex.id)
        if stuck and stuck[0] == ex.id:
            entry = {"status": stuck[1], "passed": 0, "total": 0, "hidden_passed": 0, "hidden_total": 0,
                     "why": stuck[2]}
        elif r:
            entry = {k: r.get(k, 0) for k in ("status", "passed", "total", "hidden_passed", "hidden_total")}
        else:
            entry = {"status": NOT_RUN, "passed": 0, "total": 0, "hidden_passed": 0, "hidden_total": 0,
                     "why": why and f"the notebook stopped before its check: {why}"}
        entry["points"] = ex.points
        report.exercises[ex.id] = entry
    return report


def describe(reports: list[NotebookReport]) -> list[str]:
    lines = []
    for rep in reports:
        lines.append(f"{rep.notebook} ({rep.path})")
        for ex_id, e in rep.exercises.items():
            if e["status"] in (PASS, FAIL) and not e.get("why"):
                what = f"{e['passed']} of {e['total']} public cases pass"
            elif e["status"] == NOT_ATTEMPTED:
                what = "the function still raises NotImplementedError"
            else:
                what = e.get("why") or "its check cell did not run"
            lines.append(f"  {e['status'].upper() if e['status'] == FAIL else e['status']:<13} {ex_id}: {what}")
        done = sum(e["status"] == PASS for e in rep.exercises.values())
        summary = f"  {rep.notebook}: {done} of {len(rep.exercises)} exercises pass"
        for status in (FAIL, TIMED_OUT, NOT_ATTEMPTED, NOT_RUN):
            named = [i for i, e in rep.exercises.items() if e["status"] == status]
            if named:
                summary += f"; {status}: {', '.join(named)}"
        lines.append(summary)
        if rep.error:
            lines.append(f"  {rep.error}")
    return lines


def write_json(reports: list[NotebookReport], path: Path, profile: str) -> None:
    from ..results import provenance

    payload = {"profile": profile, "ok": all(r.ok for r in reports), "notebooks": [asdict(r) for r in reports],
               "provenance": provenance()}
    Path(path).write_text(json.dumps(payload, indent=1) + "\n")

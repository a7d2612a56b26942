"""``labkit check``: execute notebooks headlessly and report every exercise they hold.

Each notebook runs under papermill (``labkit.run.runner``) with ``$LABKIT_CHECK_LOG`` set, so every ``check()``
its cells call appends its result there; an exercise whose check never ran (the notebook stopped before it)
is reported "not run". ``check.json`` keeps the whole report.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import settings as _settings
from .check import FAIL, LOG_ENV, NOT_ATTEMPTED, PASS
from .catalog import for_notebook, registry

NOT_RUN = "not run"


@dataclass
class NotebookReport:
    notebook: str
    path: str
    executed: str | None
    error: str | None
    exercises: dict[str, dict] = field(default_factory=dict)   # id -> {status, passed, total, ...}

    @property
    def ok(self) -> bool:
        return self.error is None and all(e["status"] == PASS for e in self.exercises.values())


def notebooks_in(paths: list[Path]) -> list[Path]:
    """Notebook files named, or the lab notebooks inside named folders; each must be a lab notebook."""
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
    return found


def run(paths: list[Path], profile: str = "smoke", hidden: int | None = None, out_dir: Path | None = None,
        log=print) -> list[NotebookReport]:
    from ..run import runner

    reports = []
    out_dir = Path(out_dir or tempfile.mkdtemp(prefix="labkit-check-"))
    for path in notebooks_in(paths):
        log(f"[labkit] checking {path} (profile {profile}{'' if hidden is None else ', hidden cases'})")
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as f:
            log_path = f.name
        error, executed = None, None
        # the kernel papermill starts inherits them
        with _settings.environ({LOG_ENV: log_path}):
            try:
                executed = str(runner.run_notebook(path, profile, output_dir=out_dir, progress=False))
            except runner.NotebookError as err:
                error = str(err)
                executed = str(out_dir / path.name)
        records = [json.loads(line) for line in Path(log_path).read_text().splitlines() if line.strip()]
        os.unlink(log_path)
        report = NotebookReport(path.stem, str(path), executed, error)
        by_id = {r["id"]: r for r in records}  # a check cell run twice: its last result counts
        for ex in for_notebook(path.stem):
            r = by_id.get(ex.id)
            report.exercises[ex.id] = ({k: r[k] for k in ("status", "passed", "total", "hidden_passed", "hidden_total")}
                                       if r else {"status": NOT_RUN, "passed": 0, "total": 0, "hidden_passed": 0,
                                                  "hidden_total": 0})
            report.exercises[ex.id]["points"] = ex.points
        reports.append(report)
    return reports


def describe(reports: list[NotebookReport]) -> list[str]:
    lines = []
    for rep in reports:
        lines.append(f"{rep.notebook} ({rep.path})")
        for ex_id, e in rep.exercises.items():
            if e["status"] in (PASS, FAIL):
                what = f"{e['passed']} of {e['total']} public cases pass"
                if e["hidden_total"]:
                    what += f", {e['hidden_passed']} of {e['hidden_total']} hidden"
            elif e["status"] == NOT_ATTEMPTED:
                what = "the function still raises NotImplementedError"
            else:
                what = "its check cell did not run"
            lines.append(f"  {e['status'].upper() if e['status'] == FAIL else e['status']:<13} {ex_id}: {what}")
        done = sum(e["status"] == PASS for e in rep.exercises.values())
        summary = f"  {rep.notebook}: {done} of {len(rep.exercises)} exercises pass"
        for status in (FAIL, NOT_ATTEMPTED, NOT_RUN):
            named = [i for i, e in rep.exercises.items() if e["status"] == status]
            if named:
                summary += f"; {status}: {', '.join(named)}"
        lines.append(summary)
        if rep.error:
            lines.append(f"  the notebook stopped with an error: {rep.error}")
    return lines


def write_json(reports: list[NotebookReport], path: Path, profile: str, hidden: int | None) -> None:
    from ..results import provenance

    payload = {"profile": profile, "hidden_cases": hidden is not None, "ok": all(r.ok for r in reports),
               "notebooks": [asdict(r) for r in reports], "provenance": provenance()}
    Path(path).write_text(json.dumps(payload, indent=1) + "\n")

"""Which committed full-profile results a regeneration made: each record's results (``figures/<lab>/<result>.json``)
against the state's done runs. A result is the regeneration's where a done run lists its file, or (steps side by
side list none) where its provenance names a call's commit and was written within that call; a result measured
on a CPU is named as such (Lab 4's CPU half may stay a CPU run)."""
from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

from .. import records
from .. import settings as _settings

SLACK_S = 120  # a call's results are written before its state is packed, the clocks of one machine


def epoch(stamp: str) -> float:
    """``2026-12-02T14:07:10Z`` or ``2026-12-02T14:10:05+00:00`` as a Unix time."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))


def classify(state: dict, figures: Path | None = None) -> dict[str, list[str]]:
    """``{"made", "not_made", "cpu", "missing", "unreadable"}`` -> paths ``<lab>/<result>.json``."""
    figures = Path(figures or _settings.figures_dir())
    listed = {f for entry in state.get("steps", {}).values() for run in entry.get("runs", [])
              if run.get("status") == "done" for f in run.get("files", [])}
    calls = [(c["commit"], epoch(c["started"]), epoch(c["started"]) + c.get("seconds", 0) + SLACK_S)
             for c in state.get("calls", []) if c.get("started") and c.get("commit")]
    out: dict[str, list[str]] = {"made": [], "not_made": [], "cpu": [], "missing": [], "unreadable": []}
    for nb in records.records():
        rec = records.get(nb)
        for name in rec.results:
            rel = f"{rec.lab}/{name}.json"
            path = figures / rel
            if not path.exists():
                out["missing"].append(rel)
                continue
            try:
                prov = json.loads(path.read_text()).get("provenance", {})
            except (ValueError, AttributeError):  # not a result's JSON object: said, not counted
                out["unreadable"].append(rel)
                continue
            if str(prov.get("device", "")).lower().startswith("cpu"):
                out["cpu"].append(rel)
            elif rel in listed or any(prov.get("git_commit") == commit and start <= epoch(prov["created"]) <= end
                                      for commit, start, end in calls if prov.get("created")):
                out["made"].append(rel)
            else:
                out["not_made"].append(rel)
    return out


def summary(state: dict, figures: Path | None = None) -> str:
    """One line for ``labkit regenerate --status``: how many GPU results this regeneration made, and which not."""
    c = classify(state, figures)
    gpu = len(c["made"]) + len(c["not_made"])
    text = f"  results from this regeneration: {len(c['made'])} of {gpu} GPU results"
    if c["not_made"]:
        text += "; not (yet): " + ", ".join(c["not_made"])
    if c["cpu"]:
        text += "; CPU runs, named as such: " + ", ".join(c["cpu"])
    for key in ("missing", "unreadable"):
        if c[key]:
            text += f"; {key}: " + ", ".join(c[key])
    return text

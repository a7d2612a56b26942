"""A new lab is its notebook source, its record, its lab code, plots, answers and readings modules, and its tests:
nothing else is edited. A toy lab dropped into the tree as those files alone is found by every tool (settings and
their override checks, the runner, redraw, claims, the regeneration plan, the CLI), runs end to end, and leaves
its results, figure, readings and answers where the real labs leave theirs."""
import importlib
import json
import sys
from pathlib import Path

import pytest

from labkit import records, redraw
from labkit.exercises import editions
from labkit.maintain import claims
from labkit.run import profiles, runner

ROOT = Path(__file__).resolve().parents[2]
KEY = "lab9_toy"

FILES = {
    f"notebooks/src/{KEY}.py": '''\
# %% [markdown]
# # Lab 9: a toy lab
#
# Squares of the first `n` integers, drawn, read and answered.

# %% tags=["parameters"]
PROFILE = "auto"
OVERRIDES = {}

# %%
from labkit import redraw
from labkit.labs.lab9_toy import squares
from labkit.run.profiles import lab_settings

S = lab_settings("lab9_toy", PROFILE, **OVERRIDES)
numbers = squares(S)
redraw.show("lab9_toy", "squares", numbers, S)

# %% tags=["answer-key"]
redraw.close("lab9_toy", S)
''',
    f"labkit/records/{KEY}.py": '''\
"""Lab 9: a toy lab."""
from . import Notebook, Settings, Step

SETTINGS = Settings("lab9", {"smoke": {"n": 3}, "quick": {"n": 4}, "full": {"n": 5}}, imdb=False,
                    ranges={"n": (0, False, 100, True)})
RECORD = Notebook("lab9_toy", "9", "lab9", SETTINGS, results=("squares",), figures=("squares",),
                  answers="toy_answers.md", steps=(Step("lab9_toy", 5, order=99),), seeded=())
''',
    f"labkit/labs/{KEY}.py": '''\
"""Lab 9's code: the squares the notebook stores."""


def squares(s: dict) -> dict:
    return {"n": s["n"], "squares": [i * i for i in range(s["n"])]}
''',
    f"labkit/plots/{KEY}.py": '''\
"""Lab 9's figure."""
import matplotlib.pyplot as plt


def plot_squares(payload):
    fig, ax = plt.subplots()
    ax.plot(payload["numbers"]["squares"], marker="o")
    ax.set_title(f"squares, n = {payload['settings']['n']}")
    return fig
''',
    f"labkit/readings/{KEY}.py": '''\
"""Lab 9's readings: the stored squares sum to n(n-1)(2n-1)/6."""
from .core import check


def readings(payloads):
    p = payloads.get("squares")
    if p is None:
        return []
    n, sq = p["numbers"]["n"], p["numbers"]["squares"]
    want = n * (n - 1) * (2 * n - 1) // 6
    return [check("squares.sum", sum(sq) == want, f"the {n} squares sum to {want}, as n(n-1)(2n-1)/6 says",
                  f"the {n} squares sum to {sum(sq)}, not {want}", source="squares", rule="sum == n(n-1)(2n-1)/6",
                  quantities={"n": n, "sum": sum(sq)})]
''',
    f"labkit/answers/{KEY}.py": '''\
"""Lab 9's answers."""
from ..readings import compute


def render(payloads, folder=None) -> str:
    return "# Lab 9: a toy lab\\n\\n" + "\\n".join(f"- {r.says}" for r in compute("lab9_toy", payloads)) + "\\n"
''',
}
BUILT = f"notebooks/{KEY}.ipynb"


@pytest.fixture
def toy_lab(monkeypatch, tmp_path):
    """The toy lab's files in the tree for this test only (the notebook kernel imports labkit from it)."""
    written = []
    try:
        for rel, text in FILES.items():
            path = ROOT / rel
            assert not path.exists(), f"{rel} exists: the toy lab's key must be free"
            path.write_text(text)
            written.append(path)
        built = ROOT / BUILT
        built.write_text(editions.render(editions.parse(FILES[f"notebooks/src/{KEY}.py"])))
        written.append(built)
        monkeypatch.setattr(records, "_FOUND", None)
        importlib.invalidate_caches()
        monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figures"))
        monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "runs"))
        yield tmp_path / "figures"
    finally:
        for path in written:
            path.unlink(missing_ok=True)
        for name in [m for m in sys.modules if m.endswith(f".{KEY}")]:
            del sys.modules[name]
        records._FOUND = None


@pytest.mark.notebook
@pytest.mark.serial  # its files sit in the tree while it runs: no other test may run beside it
def test_a_toy_lab_is_its_files_alone(toy_lab, capsys):
    figures = toy_lab
    # found by the records, its settings resolved and its overrides checked against its own range
    assert KEY in records.records() and records.get(KEY).lab == "lab9"
    assert profiles.lab_settings(KEY, "smoke")["n"] == 3
    assert profiles.lab_settings(KEY, "full", n=7)["n"] == 7
    with pytest.raises(ValueError, match=r"setting n=0 is out of range; allowed: \(0, 100\]"):
        profiles.lab_settings(KEY, "full", n=0)
    assert any(s.notebook == KEY for s in records.steps())  # the regeneration plan takes its step

    # the runner finds it by lab and by name and runs it headlessly (papermill)
    runner.check_run(["lab9"], "full", {"n": 6})
    runner.run_labs([KEY], "full", overrides={"n": 6}, progress=False)
    stored = json.loads((figures / "lab9" / "squares.json").read_text())
    assert stored["numbers"]["squares"] == [0, 1, 4, 9, 16, 25] and stored["settings"]["n"] == 6
    assert (figures / "lab9" / "squares.png").stat().st_size > 0
    assert [r["key"] for r in stored["readings"]] == ["squares.sum"] and stored["readings"][0]["verdict"] == "holds"
    answers = (figures / "lab9" / "toy_answers.md").read_text()
    assert "the 6 squares sum to 55, as n(n-1)(2n-1)/6 says" in answers

    # redraw re-renders the same answers and redraws the figure from the JSON: the same numbers give the same
    # bytes, so nothing it stored changes (a redraw is idempotent); claims read its readings
    stored_files = {p.name: p.read_bytes() for p in (figures / "lab9").iterdir()}
    assert redraw.main([KEY]) == 0
    assert (figures / "lab9" / "toy_answers.md").read_text() == answers
    assert {p.name: p.read_bytes() for p in (figures / "lab9").iterdir()} == stored_files
    found = {c.name: c.holds for c in claims.check_all(figures) if c.lab == "lab9"}
    assert found == {f"{KEY}: the stored readings are its numbers' readings": True, f"{KEY}: squares.sum": True}

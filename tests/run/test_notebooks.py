"""Every lab notebook: committed clean, in sync with its source, and executes under the smoke profile."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from _executions import EXECUTED, Execution, read_inputs
from labkit.run import runner
from labkit.exercises import editions, for_notebook, headless
from labkit.exercises.inputs import uncovered

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("lab*_*.ipynb"))


def test_notebooks_exist():
    assert {p.name.split("_")[0] for p in NOTEBOOKS} >= {"lab0"}


def test_notebooks_match_sources():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "build_notebooks.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterised(path):
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    runner.check_parameters_cell(path)


MAX_CODE_LINES = 60


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_narrates(path):
    """At most MAX_CODE_LINES lines of code (exercise solutions aside): the lab's code lives in labkit, each figure
    is drawn and saved by one call and the notebook closes with one."""
    nb = nbformat.read(path, as_version=4)
    assert editions.code_lines(nb) <= MAX_CODE_LINES, f"{path.name}: {editions.code_lines(nb)} lines of code"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code[-1].splitlines()[-1] == f'redraw.close("{path.stem}", S)', "the closing call is not the last line"
    assert not any("save_figure(" in c or "plot_" in c for c in code), "a figure not drawn through redraw.show"


def test_code_lines_count_code_not_comments_or_solutions():
    cells = [nbformat.v4.new_code_cell("x = 1\n# a comment\n"),
             nbformat.v4.new_code_cell(f"def f():\n    {editions.BEGIN}\n    return 1\n    {editions.END}"),
             nbformat.v4.new_markdown_cell("text")]
    nb = nbformat.v4.new_notebook(cells=cells)
    assert editions.code_lines(nb) == 2  # x = 1 and def f(): (the solution's return is the student's)


def test_missing_parameters_cell_is_rejected(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    path = tmp_path / "lab9_x.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ValueError, match="parameters"):
        runner.check_parameters_cell(path)


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_smoke_profile(path, tmp_path, monkeypatch):  # conftest's "notebooks" process group
    """The solution edition runs, every exercise's solution passes its check; then the student edition, its
    exercises untouched, runs end to end on labkit's fallbacks (reusing the solution run's cached models, so it
    costs a fraction of the first run) and `labkit check` reports each exercise "not attempted". Where the
    browser test already ran the solution edition in JupyterLab this session, its run is the one checked."""
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figures"))
    run = EXECUTED.pop(path.stem, None) or _papermill(path, tmp_path, monkeypatch)
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(run.runs))  # the student edition reuses the solution run's results
    exercises = {ex.id for ex in for_notebook(path.stem)}
    assert {r["id"] for r in run.checks} == exercises
    assert all(r["status"] == "pass" and r["passed"] == r["total"] for r in run.checks), run.checks
    for ex in for_notebook(path.stem):  # the cases span what the lab feeds each function
        calls = [r["call"] for r in run.inputs if r["id"] == ex.id]
        assert calls, f"{ex.id}: the lab never called the function its check hands back"
        assert not uncovered(ex, calls), (ex.id, uncovered(ex, calls))
    student = headless.run([ROOT / "notebooks" / "student" / path.name], "smoke", out_dir=tmp_path / "student",
                        log=lambda line: None)[0]
    assert student.error is None, student.error
    assert {i: e["status"] for i, e in student.exercises.items()} == {i: "not attempted" for i in exercises}
    errors = [o for c in run.notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert run.saved, "the notebook saved no results JSON"
    for payload in run.saved:
        assert payload["settings"]["profile"] == "smoke" and payload["provenance"]["versions"]


def _papermill(path, tmp_path, monkeypatch) -> Execution:
    """The solution edition run headlessly here (fresh Optuna storage, no resuming)."""
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "runs"))
    log, inputs = tmp_path / "checks.jsonl", tmp_path / "inputs.jsonl"
    monkeypatch.setenv("LABKIT_CHECK_LOG", str(log))
    monkeypatch.setenv("LABKIT_RECORD_INPUTS", str(inputs))
    out = runner.run_notebook(path, "smoke", output_dir=tmp_path, progress=False, timeout=1800)
    monkeypatch.delenv("LABKIT_CHECK_LOG")
    monkeypatch.delenv("LABKIT_RECORD_INPUTS")
    checks = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    saved = [json.loads(p.read_text()) for p in (tmp_path / "figures").rglob("*.json")]
    return Execution(nbformat.read(out, as_version=4), checks, saved, tmp_path / "runs",
                     read_inputs(inputs, path.stem))


def test_a_batch_run_prints_its_total(monkeypatch, capsys, tmp_path):
    from labkit.run import runner
    monkeypatch.setattr(runner, "run_notebook", lambda path, *a, **k: tmp_path / path.name)
    done = runner.run_labs(["lab1"], "smoke")
    out = capsys.readouterr().out
    assert len(done) == 2 and "[labkit] 2 notebooks in" in out and "lab1_prune" in out and "lab1_quantize" in out

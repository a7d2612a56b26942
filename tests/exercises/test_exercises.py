"""The student edition: every exercise's checks are strong (self-test), the check prints what a student needs,
the two editions are built from one source, and the student edition holds no solution and no key."""
import dataclasses
import json
import re
from pathlib import Path

import nbformat
import pytest
import torch

from labkit.exercises import check, editions, evaluate, get, registry, self_test
from labkit.exercises.check import hidden_cases
from labkit.exercises.core import differs

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("lab*_*.py"))
STUDENT = ROOT / "notebooks" / "student"


def test_self_test_every_exercise_reference_stub_and_mutants():
    result = self_test(log=lambda line: None)
    assert result.ok, result.problems
    assert result.references == result.stubs == result.exercises
    assert result.caught == result.mutants >= 2 * result.exercises


def test_at_least_16_exercises_two_per_lab():
    found = registry()
    assert len(found) >= 16, sorted(found)
    for lab in ("lab0", "lab1", "lab2", "lab3", "lab4"):
        assert sum(ex.lab == lab for ex in found.values()) >= 2, lab
    assert sum(ex.lab == "lab5" for ex in found.values()) >= 3  # Lab 5: perplexity, PTQ and AWQ each have one


def test_every_exercise_has_one_exercise_and_check_cell_in_its_notebook():
    sources = {p.stem: editions.parse(p.read_text()) for p in SOURCES}
    for ex in registry().values():
        assert ex.notebook in sources, f"{ex.id}: no notebook source {ex.notebook}"
        nb = sources[ex.notebook]
        checks = [c for c in nb.cells if editions.role(c) == "check" and c.metadata.get("exercise") == ex.id]
        solutions = [c for c in nb.cells if editions.role(c) == "exercise" and c.metadata.get("exercise") == ex.id]
        assert len(checks) == 1 and len(solutions) == 1, ex.id
        assert checks[0].metadata["points"] == ex.points and checks[0].metadata["nbgrader"]["locked"]
        assert not checks[0].metadata["nbgrader"]["grade"]  # a check cell never fails: not an nbgrader test


def test_hidden_cases_are_fresh_per_seed_and_repeatable():
    for ex in registry().values():
        a, b, c = hidden_cases(ex, 1), hidden_cases(ex, 1), hidden_cases(ex, 2)
        assert len(a) >= 3, ex.id
        assert [x.shown() for x in a] == [x.shown() for x in b], ex.id
        assert [x.shown() for x in a] != [x.shown() for x in c], f"{ex.id}: seeds 1 and 2 drew the same cases"


def test_check_lines_summary_and_fallback(capsys):
    ex = get("lab1.fixed_point")

    def half_up(x, width, frac_width):  # a plausible mistake: floor(x + 0.5)
        s = 2.0 ** frac_width
        return (torch.floor(x * s + 0.5).clamp(-(2 ** (width - 1)), 2 ** (width - 1) - 1) / s).to(x.dtype)

    r = check("lab1.fixed_point", half_up)
    out = capsys.readouterr().out
    assert r.status == "fail" and r.fn is ex.reference
    assert re.search(r"lab1\.fixed_point: \d+ of \d+ public cases pass", out)
    assert "FAIL  ties round half to even" in out and "hint: " in out and "expected" in out and "got" in out
    assert "all tests passed" not in out.lower()
    assert "falls back to labkit's labkit.quant.formats.integer.quantize_fixed_point" in out

    def stub(x, width, frac_width):
        raise NotImplementedError

    r = check("lab1.fixed_point", stub)
    assert r.status == "not attempted" and r.fn is ex.reference
    assert "not attempted" in capsys.readouterr().out


def test_a_crashing_function_is_a_failed_case_not_a_crash(capsys):
    def broken(x, width, frac_width):
        return x.no_such_method()

    r = check("lab1.fixed_point", broken)
    out = capsys.readouterr().out
    assert r.status == "fail" and r.passed == 0 and "raised AttributeError" in out


def test_no_hidden_seed_reaches_the_students_kernel(monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_CHECK_HIDDEN", "7")  # the variable check() used to read: ignored now
    r = check("lab1.fixed_point", get("lab1.fixed_point").reference)
    assert r.ok and r.hidden_total == 0 and "hidden" not in capsys.readouterr().out


def test_a_failed_case_that_matches_a_mutant_names_the_mistake(capsys):
    ex = get("lab1.fixed_point")
    r = check("lab1.fixed_point", ex.mutants["no clamp"])
    failed = [c for c in r.cases if not c.ok]
    assert failed and all(c.mistake == "no clamp" for c in failed)
    assert "this is the known mistake: no clamp" in capsys.readouterr().out


def test_exit_and_interrupt_in_a_students_function_fail_the_case(capsys):
    import sys

    def exits(x, width, frac_width):
        sys.exit(3)

    def interrupted(x, width, frac_width):
        raise KeyboardInterrupt

    for fn, name in ((exits, "SystemExit"), (interrupted, "KeyboardInterrupt")):
        r = check("lab1.fixed_point", fn)
        assert r.status == "fail" and r.passed == 0 and f"raised {name}" in capsys.readouterr().out


def test_a_function_that_changes_its_input_in_place_fails():
    def in_place(x, width, frac_width):
        s = 2.0 ** frac_width
        return x.mul_(s).round_().clamp_(-(2 ** (width - 1)), 2 ** (width - 1) - 1).div_(s)

    r = evaluate("lab1.fixed_point", in_place)
    changed = [c for c in r.cases if "changed its input in place" in c.why]
    assert r.status == "fail" and changed, [c.why for c in r.cases]


def test_check_log_records_each_result(monkeypatch, tmp_path):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("LABKIT_CHECK_LOG", str(log))
    check("lab1.fixed_point", get("lab1.fixed_point").reference, quiet=True)
    rec = json.loads(log.read_text().splitlines()[-1])
    assert rec["id"] == "lab1.fixed_point" and rec["status"] == "pass" and rec["passed"] == rec["total"]


def test_installed_routes_the_library_through_a_passing_function_and_restores_it():
    from labkit.quant.formats import integer

    calls = []

    def mine(x, width, frac_width):
        calls.append(width)
        s = 2.0 ** frac_width
        return (torch.round(x * s).clamp(-(2 ** (width - 1)), 2 ** (width - 1) - 1) / s).to(x.dtype)

    result = evaluate("lab1.fixed_point", mine)
    before = integer.quantize_fixed_point
    with result.installed():
        y = integer.IntegerFormat(width=4, frac_width=1).quantize_values(torch.tensor([0.75, 9.0]))
    assert integer.quantize_fixed_point is before and calls and y.tolist() == [1.0, 3.5]
    with evaluate("lab1.fixed_point", lambda x, w, f: x).installed():  # failing: labkit's stays
        assert integer.quantize_fixed_point is before


def test_every_lab_module_is_discovered_and_an_exercise_names_a_record():
    from labkit import records
    from labkit.exercises import core

    mods = sorted(p.stem for p in (Path(core.__file__).parent).glob("lab*.py") if re.fullmatch(r"lab\d+", p.stem))
    assert sorted({ex.id.split(".")[0] for ex in registry().values()}) == mods
    assert all(ex.notebook in records.records() for ex in registry().values())
    good = get("lab1.fixed_point")
    for notebook, allowed in (("lab1_nope", "lab1_quantize, lab1_prune"), ("lab2_search", "lab1_quantize")):
        with pytest.raises(ValueError, match=f"notebook {notebook!r} is not one of lab1's notebooks; allowed: "
                                             f"{allowed}"):
            core.validate(dataclasses.replace(good, notebook=notebook))
    with pytest.raises(ValueError, match="lab one of lab0, lab1, lab2, lab3, lab4"):
        core.validate(dataclasses.replace(good, id="lab9.x"))


def test_unknown_exercise_names_the_allowed():
    with pytest.raises(KeyError, match="lab1.fixed_point"):
        get("lab1.no_such")


def test_differs_reports_what_differs():
    assert differs(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")])) is None
    assert "dtype" in differs(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    assert "shape" in differs(torch.zeros(2), torch.zeros(3))
    assert "index [1]" in differs(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))
    assert differs(torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]), atol=1e-6) is None
    assert differs({"a": [1, 2]}, {"a": [1, 3]}) is not None
    assert differs(0.5, True) is not None


# --- the two editions -----------------------------------------------------------------------------------

def test_stub_keeps_the_signature_and_indent():
    src = "def f(x):\n    \"\"\"doc\"\"\"\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    out = editions.stub_solution(src)
    assert out == "def f(x):\n    \"\"\"doc\"\"\"\n    # YOUR CODE HERE\n    raise NotImplementedError"
    with pytest.raises(ValueError, match="without"):
        editions.stub_solution("    ### BEGIN SOLUTION\n    x = 1\n")


def test_unknown_role_or_header_is_refused():
    with pytest.raises(ValueError, match="allowed"):
        editions.parse('# %% tags=["solutoin"]\nx = 1\n')
    with pytest.raises(ValueError, match="unreadable cell header"):
        editions.parse("# %% [md]\n# text\n")


def _code_and_markdown(nb):
    return "\n".join(c.source for c in nb.cells)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_student_edition_holds_no_solution_and_no_answer_key(src):
    solution = editions.parse(src.read_text())
    nb = nbformat.read(STUDENT / f"{src.stem}.ipynb", as_version=4)
    text = _code_and_markdown(nb)
    # what the solution edition says outside its solution regions (a docstring may name a call the solution makes)
    public = "\n".join(editions.stub_solution(c.source) if editions.role(c) == "exercise" else c.source
                       for c in solution.cells if editions.role(c) not in ("answer", "answer-key"))
    for cell in solution.cells:
        for region in editions.solution_regions(cell.source):
            for line in region.splitlines():
                line = line.strip()
                if len(line) > 12 and line not in public:  # a line long enough to be the solution's own text
                    assert line not in text, f"{src.stem}: solution text reached the student: {line}"
        if editions.role(cell) in ("answer-key", "answer") and cell.source.strip():
            assert cell.source not in text
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for call in editions.ANSWER_KEY_CALLS:
        assert call not in code, f"{src.stem}: the student edition calls {call}"
    assert "### BEGIN SOLUTION" not in text
    assert not any(editions.role(c) == "answer-key" for c in nb.cells)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_student_edition_opens_with_a_task_map_naming_every_task(src):
    nb = nbformat.read(STUDENT / f"{src.stem}.ipynb", as_version=4)
    tasks = [c for c in nb.cells if editions.role(c) in ("exercise", "answer")]
    assert tasks, f"{src.stem} sets no task"
    assert "task-map" in nb.cells[1].metadata.get("tags", [])
    for c in tasks:
        cell_number = nb.cells.index(c) + 1
        label = c.metadata.get("exercise") or f"question {c.metadata['question']}"
        row = next(line for line in nb.cells[1].source.splitlines() if label in line)
        assert row.rstrip(" |").endswith(str(cell_number)), (label, row, cell_number)
    for i, c in enumerate(nb.cells):
        if editions.role(c) == "answer":
            assert c.source == editions.YOUR_ANSWER and c.metadata["nbgrader"]["solution"]
            asked = nb.cells[i - 1]  # the question stays visible above the blanked answer
            assert asked.cell_type == "markdown" and f"Question {c.metadata['question']}" in asked.source
        if editions.role(c) == "exercise":
            assert "raise NotImplementedError" in c.source and "# YOUR CODE HERE" in c.source


def test_a_students_installed_function_gets_its_own_per_seed_cache(monkeypatch, tmp_path):
    from labkit.labs import per_seed

    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(per_seed, "_clean_commit", lambda: "c0ffee")
    calls = []
    per_seed.run("lab1", "x", {"a": 1}, [0], lambda seed: calls.append(seed) or {"v": 1})
    per_seed.run("lab1", "x", {"a": 1}, [0], lambda seed: calls.append(seed) or {"v": 1})
    assert calls == [0]  # labkit's numbers: reused
    with evaluate("lab1.fixed_point", get("lab1.fixed_point").reference).installed():
        assert "student:lab1.fixed_point" in per_seed.EXTRA
        per_seed.run("lab1", "x", {"a": 1}, [0], lambda seed: calls.append(seed) or {"v": 2})
    assert calls == [0, 0] and not per_seed.EXTRA  # the student's function computed its own


def test_edition_only_cells_reach_their_edition_alone():
    src = ('# %% [markdown]\n# # Title\n\n# %% [markdown] tags=["solution-only"]\n# shows the stored results\n\n'
           '# %% [markdown] tags=["student-only"]\n# measures what it has\n')
    parsed = editions.parse(src, "lab1_quantize")
    assert [c.source for c in editions.solution(parsed).cells] == ["# Title", "shows the stored results"]
    assert [c.source for c in editions.student(parsed).cells] == ["# Title", "measures what it has"]

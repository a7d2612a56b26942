"""`labkit grade` on a synthetic class built from the sources: the reference solutions score full marks, the
untouched student edition 0, and every attack a student could write scores 0 or is flagged on the exercise it
attacks while every other exercise of that notebook is graded normally. The gradebook's files hold what they
promise (CSV totals, Gradescope's format), and no graded process sees the hidden seed or a staff path."""
from __future__ import annotations

import base64
import csv
import json
import os
import shutil
from pathlib import Path

import jsonschema
import nbformat
import pytest

from labkit.exercises import registry
from labkit.exercises.grading import grader, run, submissions
from labkit.exercises.grading.runtime import Limits, Runtime, Sandbox
from labkit.sandbox import codec

ROOT = Path(__file__).resolve().parents[2]
SEED = 918273645                     # a number no graded process may see
TIMEOUT = 6.0

IMPORT = "from labkit.exercises import catalog\n"
ATTACKS = {
    # name: (exercise attacked, cell source with {fn} and {id}, what must happen: "zero" or the flag)
    "import": ("lab1.fixed_point", "def {fn}(*a, **k):\n    from labkit.exercises import catalog\n"
               "    return catalog.get('{id}').reference(*a, **k)\n", grader.USES_LABKIT),
    "importlib": ("lab1.average_bits", "import importlib\ndef {fn}(*a, **k):\n    return importlib.import_module("
                  "'labkit.exercises.catalog').get('{id}').reference(*a, **k)\n", grader.USES_LABKIT),
    "sys.modules": ("lab0.merge_lora", "import sys\ndef {fn}(*a, **k):\n    m = sys.modules.get("
                    "'labkit.exercises.catalog') or sys.modules['labkit'].exercises.catalog\n"
                    "    return m.get('{id}').reference(*a, **k)\n", grader.USES_LABKIT),
    "exec base64": ("lab3.log", "import base64\ndef {fn}(*a, **k):\n    ns = {{}}\n"
                    f"    exec(base64.b64decode('{base64.b64encode(IMPORT.encode()).decode()}'), ns)\n"
                    "    return ns['catalog'].get('{id}').reference(*a, **k)\n", grader.USES_LABKIT),
    "a name the notebook bound to labkit": ("lab1.l1_mask", "def {fn}(weight, sparsity):\n"
                                            "    return recipes.__dict__\n", grader.USES_LABKIT),
    "monkeypatch labkit.exercises": ("lab2.best_so_far", "import labkit.exercises.check as c\n"
                                     "c.evaluate = lambda *a, **k: None\n"
                                     "def {fn}(*a, **k):\n    raise NotImplementedError\n", grader.USES_LABKIT),
    "forged log lines": ("lab2.search_space", "import json, os\n"
                         "with open(os.environ.get('LABKIT_CHECK_LOG') or 'check.jsonl', 'a') as f:\n"
                         "    f.write(json.dumps({{'id': '{id}', 'status': 'pass', 'passed': 7, 'total': 7}}) + '\\n')\n"
                         "with open('result.jsonl', 'a') as f:\n"
                         "    f.write(json.dumps({{'done': True, 'case': 0, 'outcome': {{'value': 1}}}}) + '\\n')\n"
                         "def {fn}(*a, **k):\n    raise NotImplementedError\n", "zero"),
    "__eq__ always true": ("lab3.block_fp", "class Same:\n    def __eq__(self, other):\n        return True\n"
                           "    def __ne__(self, other):\n        return False\n"
                           "def {fn}(*a, **k):\n    return Same()\n", "zero"),
    "a tensor subclass": ("lab3.minifloat_denorm", "import torch\nclass Liar(torch.Tensor):\n"
                          "    def __eq__(self, other):\n        return torch.ones((), dtype=torch.bool)\n"
                          "def {fn}(x, *a, **k):\n    return torch.Tensor._make_subclass(Liar, torch.zeros_like(x))\n",
                          "zero"),
    "while True": ("lab4.timer", "def {fn}(*a, **k):\n    while True:\n        pass\n", "timed out"),
    "sleep past the limit": ("lab4.naive_attention", "import time\ndef {fn}(*a, **k):\n    time.sleep(1000)\n",
                             "timed out"),
    "os._exit(1)": ("lab4.mxint8_quantize", "import os\ndef {fn}(*a, **k):\n    os._exit(1)\n", "crashed"),
    "segfault (ctypes)": ("lab4.mxint8_decode", "import ctypes\ndef {fn}(*a, **k):\n    ctypes.string_at(0)\n",
                          "zero"),
    "segfault (faulthandler)": ("lab0.count_dropout", "import faulthandler\ndef {fn}(*a, **k):\n"
                                "    faulthandler._sigsegv()\n", "crashed"),
    "50 GB allocation": ("lab2.compression_objective", "import torch\ndef {fn}(*a, **k):\n"
                         "    return torch.ones(50 * 2 ** 30, dtype=torch.uint8)\n", "zero"),
    "100 MB printed": ("lab3.average_bits", "def {fn}(*a, **k):\n    print('x' * (100 * 2 ** 20))\n",
                       "output over the limit"),
    "reads os.environ": ("lab0.remove_dropout", "import os\nSEEN = dict(os.environ)\n"
                         "def {fn}(*a, **k):\n    raise NotImplementedError(str(SEEN))\n", "zero"),
    "syntax error": ("lab1.fixed_point", "def {fn}(x, width, frac_width)\n    return x\n", "zero"),
    "edited check cell": ("lab1.average_bits", None, "edited locked cell"),
    "deleted check cell": ("lab0.count_dropout", None, "edited locked cell"),
}


def _attack_notebook(name, ex_id, source, released):
    """The reference notebook of ``ex_id`` with the attack: its exercise cell replaced, or its check cell
    edited or deleted."""
    stem = registry()[ex_id].notebook
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    fn = released[stem].exercises[ex_id].function
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("exercise") != ex_id:
            continue
        role = cell.metadata.get("tags", [None])[0]
        if role == "exercise" and source is not None:
            cell.source = source.format(fn=fn, id=ex_id)
        elif role == "check" and name == "edited check cell":
            cell.source = f"# passes, trust me\n{fn} = check('{ex_id}', {fn})"
        elif role == "check" and name == "deleted check cell":
            del nb.cells[i]
            break
    return stem, nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    subs, out = base / "submissions", base / "gradebook"
    released = submissions.release()
    ref = subs / "ref"
    ref.mkdir(parents=True)
    for path in sorted((ROOT / "notebooks").glob("lab*_*.ipynb")):  # renamed as a course platform would
        shutil.copyfile(path, ref / f"ref_{path.name}")
    shutil.copytree(ROOT / "notebooks" / "student", subs / "stub")
    attacks = {}
    for n, (name, (ex_id, source, expect)) in enumerate(ATTACKS.items()):
        sid = f"attack{n:02d}"
        (subs / sid).mkdir()
        stem, nb = _attack_notebook(name, ex_id, source, released)
        nbformat.write(nb, subs / sid / "homework.ipynb")  # recognised by its metadata, not its name
        attacks[sid] = (name, ex_id, stem, expect)
    grades = run.grade(subs, out, hidden_seed=SEED, jobs=2, limits=Limits(timeout=TIMEOUT), log=lambda line: None)
    return {s.id: s for s in grades}, attacks, out


def test_the_reference_scores_full_marks_and_the_stub_0(graded):
    grades, _, _ = graded
    ref, stub = grades["ref"], grades["stub"]
    points = {ex.id: ex.points for ex in registry().values()}
    assert {g.id: g.score for g in ref.exercises} == points, [(g.id, g.status, g.detail) for g in ref.exercises]
    assert not any(g.flags for g in ref.exercises) and ref.total == sum(points.values())
    assert {g.id: (g.score, g.status) for g in stub.exercises} == {i: (0.0, "not attempted") for i in points}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_scores_0_or_is_flagged_on_its_exercise_only(graded, attack):
    grades, attacks, _ = graded
    sid = next(s for s, (name, *_) in attacks.items() if name == attack)
    _, ex_id, stem, expect = attacks[sid]
    student = grades[sid]
    attacked = next(g for g in student.exercises if g.id == ex_id)
    if expect == "zero":
        assert attacked.score == 0, (attacked.status, attacked.detail)
    else:
        assert expect in attacked.flags, (attacked.status, attacked.flags, attacked.detail)
        if expect != "edited locked cell":
            assert attacked.score == 0, (attacked.status, attacked.detail)
    for g in student.notebooks[stem].exercises:
        if g.id != ex_id:  # the rest of that notebook: graded as the reference
            assert g.score == g.points and not g.flags, (attack, g.id, g.status, g.detail)
    others = [nb for s, nb in student.notebooks.items() if s != stem]
    assert all(nb.path is None for nb in others)


def test_the_gradebook_files(graded):
    grades, attacks, out = graded
    points = {ex.id: ex.points for ex in registry().values()}
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert {r["student"] for r in rows} == set(grades)
    for r in rows:
        assert float(r["total"]) == pytest.approx(sum(float(r[i]) for i in points), abs=1e-6)
        assert int(r["max"]) == sum(points.values())
    by_id = {r["student"]: r for r in rows}
    flagged = next(s for s, (name, *_) in attacks.items() if name == "import")
    assert by_id[flagged][grader.USES_LABKIT] == "lab1.fixed_point"
    assert "lab0_graphs_lora" in by_id[flagged]["notebook missing"]
    answers = list(csv.DictReader((out / "answers.csv").open()))
    ref_answers = [a for a in answers if a["student"] == "ref"]
    assert ref_answers and all(a["answered"] == "yes" and a["text"] for a in ref_answers)
    assert all(a["answered"] == "no" for a in answers if a["student"] == "stub")
    meta = json.loads((out / "grading.json").read_text())
    assert meta["hidden_seed"] == SEED and meta["students"] == len(grades)
    feedback = (out / "students" / flagged / "feedback.md").read_text()
    assert "uses labkit's implementation" in feedback and "### lab1.fixed_point: 0 of 3 points" in feedback


GRADESCOPE = {  # the autograder's results.json (Gradescope's "Autograder Specifications")
    "type": "object",
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "stdout_visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object", "required": ["name", "score", "max_score"],
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"}, "status": {"enum": ["passed", "failed"]},
                "name": {"type": "string"}, "number": {"type": "string"}, "output": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
                "extra_data": {"type": "object"}},
            "additionalProperties": False}},
        "leaderboard": {"type": "array"}},
    "additionalProperties": False,
}


def test_results_json_is_gradescopes_format_and_adds_up(graded):
    grades, _, out = graded
    points = {ex.id: ex.points for ex in registry().values()}
    for sid, student in grades.items():
        results = json.loads((out / "students" / sid / "results.json").read_text())
        jsonschema.validate(results, GRADESCOPE)
        tests = results["tests"]
        assert sum(t["max_score"] for t in tests) == pytest.approx(sum(points.values()))
        assert sum(t["score"] for t in tests) == pytest.approx(results["score"]) == pytest.approx(student.total)
        assert {t["visibility"] for t in tests} == {"visible", "after_due_date"}
        for t in tests:
            if t["visibility"] == "after_due_date":
                assert "FAIL" not in t["output"] and "ok  " not in t["output"]  # counted, inputs not shown


def test_no_graded_process_sees_the_seed_or_a_staff_path(tmp_path, monkeypatch):
    """What a graded process can read of itself: its environment, arguments, path and working folder."""
    monkeypatch.setenv("LABKIT_HIDDEN_SEED_CANARY", str(SEED))  # in the staff process's environment only
    source = ("import os, sys\ndef probe():\n    own = open('/proc/self/environ').read() + open('/proc/self/cmdline').read()\n"
              "    return [own, repr(dict(os.environ)), repr(sys.argv), repr(sys.path), os.getcwd(),\n"
              "            repr(sys.orig_argv), repr(sys.executable)]\n")
    spec = {"source": source, "function": "probe", "preamble": [], "labkit_names": [], "runner": "call",
            "expect_raises": [], "cases": [((), {}, False)]}
    runtime = Runtime(Limits(timeout=TIMEOUT))
    try:
        box = Sandbox(runtime)
        try:
            result = box.run(spec)
        finally:
            box.close()
    finally:
        runtime.close()
    records = [json.loads(line) for line in result.records]
    outcome = codec.build(next(r for r in records if "outcome" in r)["outcome"])
    seen = "\n".join(outcome["value"])
    staff = {str(ROOT), str(Path.cwd()), str(tmp_path), os.path.realpath(ROOT), str(Path(os.sys.executable).parent)}
    assert str(SEED) not in seen
    for path in staff:
        assert path not in seen, f"a graded process sees the staff path {path}"
    assert "LABKIT" not in seen and "HF_" not in seen


def test_bad_input_is_named_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        run.grade(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "subs").mkdir()
    with pytest.raises(ValueError, match="no student folders"):
        run.grade(tmp_path / "subs", tmp_path / "out")
    with pytest.raises(ValueError, match="inside the submissions"):
        run.grade(tmp_path / "subs", tmp_path / "subs" / "gradebook")
    (tmp_path / "subs" / "bad name!").mkdir()
    with pytest.raises(ValueError, match="student folder names"):
        run.grade(tmp_path / "subs", tmp_path / "out")


def test_what_each_outcome_is_called(graded):
    grades, attacks, _ = graded

    def outcome(name):
        sid = next(s for s, (n, *_) in attacks.items() if n == name)
        return next(g for g in grades[sid].exercises if g.id == attacks[sid][1])

    assert (outcome("syntax error").status, outcome("syntax error").flags) == ("cell error", [])
    assert "SyntaxError" in outcome("syntax error").detail and "line 1 of your cell" in outcome("syntax error").detail
    assert "SIGSEGV" in outcome("segfault (faulthandler)").detail
    assert "import labkit.exercises" in outcome("import").detail
    assert outcome("forged log lines").status == "not attempted"

"""`labkit student init` then `labkit check` as a student would: an untouched working copy runs end to end and
the check exits 1 naming every exercise "not attempted"; `--self-test` exits 0; bad input is named."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.exercises import for_notebook

ROOT = Path(__file__).resolve().parents[2]
CHEAPEST = "lab4_mxint8"  # the student notebook quickest to run on the smoke profile


def _labkit(*args, cwd, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "labkit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.notebook
def test_init_then_check_an_untouched_notebook_exits_1_naming_not_attempted(tmp_path):
    work = tmp_path / "my-labs"
    out = _labkit("student", "init", work, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "9 notebooks in" in out.stdout and "sha256 verified" in out.stdout and "kernel:" in out.stdout
    assert sorted(p.name for p in work.glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks" / "student").glob("lab*_*.ipynb"))
    again = _labkit("student", "init", work, cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr  # a student's work is never overwritten

    env = {"LABKIT_FIGURES_DIR": str(tmp_path / "figures"), "LABKIT_RUNS_DIR": str(tmp_path / "runs")}
    out = _labkit("check", work / f"{CHEAPEST}.ipynb", "--json", tmp_path / "check.json", cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    ids = [ex.id for ex in for_notebook(CHEAPEST)]
    for ex_id in ids:
        assert f"not attempted {ex_id}" in " ".join(out.stdout.split()), out.stdout
    assert f"not attempted: {', '.join(ids)}" in out.stdout
    report = json.loads((tmp_path / "check.json").read_text())
    assert report["ok"] is False and report["notebooks"][0]["error"] is None
    assert {e["status"] for e in report["notebooks"][0]["exercises"].values()} == {"not attempted"}


def test_self_test_exits_0_and_prints_the_counts(tmp_path):
    out = _labkit("check", "--self-test", cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "references pass" in out.stdout and "mutants caught" in out.stdout and "PROBLEM" not in out.stdout


def test_check_names_bad_input(tmp_path):
    out = _labkit("check", tmp_path, cwd=tmp_path)
    assert out.returncode == 2 and "no lab notebooks" in out.stderr
    (tmp_path / "lab9_x.ipynb").write_text("{}")
    out = _labkit("check", tmp_path / "lab9_x.ipynb", cwd=tmp_path)
    assert out.returncode == 2 and "allowed names" in out.stderr and "lab1_quantize" in out.stderr
    out = _labkit("check", cwd=tmp_path)
    assert out.returncode == 2 and "--self-test" in out.stderr

"""`labkit check` survives what students write: a kernel that dies, a cell that never ends, a flood of output,
a bad report path or a corrupt notebook. Each becomes a line about the exercise it hit, the other notebooks are
still checked, and paths are checked before anything runs. The notebooks here are small stand-ins for
lab4_mxint8 (its exercise and check cells, none of the lab), so each run costs a kernel start."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.exercises import get
from labkit.run.engine import CAP

ROOT = Path(__file__).resolve().parents[2]
QUANTIZE = get("lab4.mxint8_quantize")
SOLVED = """def quantize_mxint8(w, group_size):
    from labkit.quant.formats.mxint import quantize_mxint8 as labkits
    return labkits(w, group_size)
"""
DECODE_STUB = "def decode_mxint8(mantissa, exponent, group_size):\n    raise NotImplementedError\n"


def _book(path: Path, quantize: str = SOLVED, between: str = "pass", decode: str = DECODE_STUB) -> Path:
    def code(source, tags=None, exercise=None):
        cell = nbformat.v4.new_code_cell(source)
        if tags:
            cell.metadata["tags"] = tags
        if exercise:
            cell.metadata["exercise"] = exercise
        return cell

    nb = nbformat.v4.new_notebook(cells=[
        code('PROFILE = "smoke"\nOVERRIDES = {}', ["parameters"]),
        code("import torch\nfrom labkit.exercises import check"),
        code(quantize, ["exercise"], "lab4.mxint8_quantize"),
        code('quant = check("lab4.mxint8_quantize", quantize_mxint8)', ["check"], "lab4.mxint8_quantize"),
        code(between),
        code(decode, ["exercise"], "lab4.mxint8_decode"),
        code('dec = check("lab4.mxint8_decode", decode_mxint8)', ["check"], "lab4.mxint8_decode"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _check(*args, cwd):
    return subprocess.run([sys.executable, "-m", "labkit", "check", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "LABKIT_RUNS_DIR": str(cwd / "runs")})


@pytest.mark.notebook
def test_a_dead_kernel_a_stuck_cell_and_a_flood_each_cost_only_what_they_hit(tmp_path):
    dies = _book(tmp_path / "dies" / "lab4_mxint8.ipynb",
                 decode="import os\ndef decode_mxint8(mantissa, exponent, group_size):\n    os._exit(1)\n")
    stuck = _book(tmp_path / "stuck" / "lab4_mxint8.ipynb", between="while True:\n    pass")
    floods = _book(tmp_path / "floods" / "lab4_mxint8.ipynb", between=f"print('x' * {3 * CAP})")
    out = _check(dies, stuck, floods, "--cell-timeout", 20, "--out", tmp_path / "executed", "--json",
                 tmp_path / "check.json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((tmp_path / "check.json").read_text())
    died, hung, flooded = (nb["exercises"] for nb in report["notebooks"])
    assert died["lab4.mxint8_quantize"]["status"] == "pass"
    assert died["lab4.mxint8_decode"]["status"] == "fail" and "kernel died" in died["lab4.mxint8_decode"]["why"]
    assert hung["lab4.mxint8_quantize"]["status"] == "pass"
    assert hung["lab4.mxint8_decode"]["status"] == "not run" and "ran past 20 s" in hung["lab4.mxint8_decode"]["why"]
    assert flooded["lab4.mxint8_quantize"]["status"] == "pass"
    assert flooded["lab4.mxint8_decode"]["status"] == "not attempted"  # the notebook ran on past the flood
    executed = nbformat.read(report["notebooks"][2]["executed"], as_version=4)
    printed = "".join(o.get("text", "") for o in executed.cells[5].outputs)  # after papermill's injected cell
    assert CAP <= len(printed) < CAP + 1000 and "output cut" in printed
    assert "kernel died" in out.stdout and "ran past 20 s" in out.stdout


@pytest.mark.notebook
def test_a_check_cell_that_loops_is_a_failed_case_within_the_case_limit(tmp_path):
    loops = "def quantize_mxint8(w, group_size):\n    while True:\n        pass\n"
    book = _book(tmp_path / "lab4_mxint8.ipynb", quantize=loops)
    env_out = subprocess.run([sys.executable, "-m", "labkit", "check", str(book), "--json", str(tmp_path / "c.json")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "LABKIT_CHECK_CASE_SECONDS": "1", "LABKIT_RUNS_DIR": str(tmp_path)})
    report = json.loads((tmp_path / "c.json").read_text())["notebooks"][0]["exercises"]
    assert report["lab4.mxint8_quantize"]["status"] == "fail", env_out.stdout + env_out.stderr
    assert report["lab4.mxint8_decode"]["status"] == "not attempted"  # the rest of the notebook ran


def test_paths_are_checked_before_anything_runs(tmp_path):
    book = _book(tmp_path / "lab4_mxint8.ipynb")
    out = _check(book, "--json", tmp_path / "no-such-folder" / "check.json", cwd=tmp_path)
    assert out.returncode == 2 and "does not exist" in out.stderr
    out = _check(book, "--json", tmp_path, cwd=tmp_path)
    assert out.returncode == 2 and "a folder" in out.stderr
    out = _check(book, "--out", tmp_path, cwd=tmp_path)
    assert out.returncode == 2 and "replace the notebooks" in out.stderr
    (tmp_path / "bad" ).mkdir()
    (tmp_path / "bad" / "lab1_quantize.ipynb").write_text("{not json")
    out = _check(tmp_path / "bad", cwd=tmp_path)
    assert out.returncode == 2 and "lab1_quantize.ipynb" in out.stderr and "not a readable notebook" in out.stderr
    out = _check(book, "--hidden", 3, cwd=tmp_path)
    assert out.returncode == 2 and "labkit grade" in out.stderr

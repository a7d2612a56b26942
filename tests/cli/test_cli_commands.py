"""The command line as a new user tries it: `python -m labkit`, one notebook of a lab run alone, the claims and
the redraw beside the regeneration."""
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import cli
from labkit.run import runner

ROOT = Path(__file__).resolve().parents[2]


def test_python_dash_m_labkit_is_the_labkit_command():
    out = subprocess.run([sys.executable, "-m", "labkit", "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    for command in ("run", "regenerate", "claims", "redraw", "check", "student"):
        assert command in out.stdout


def test_run_takes_a_notebook_as_well_as_a_lab():
    assert [p.stem for p in runner._paths_for("lab1")] == ["lab1_prune", "lab1_quantize"]
    assert [p.stem for p in runner._paths_for("lab1_quantize")] == ["lab1_quantize"]
    runner.check_run(["lab1_quantize"], "smoke", {"widths": [8]})  # its lab's settings check the overrides
    with pytest.raises(KeyError, match="notebooks lab0_graphs_lora, "):
        runner._paths_for("lab1_quantise")


def test_claims_and_redraw_are_subcommands(capsys):
    assert cli.main(["claims"]) == 0
    assert "ok   lab0:" in capsys.readouterr().out
    assert cli.main(["redraw", "lab0", "--answers", "--stdout"]) == 0
    assert capsys.readouterr().out.startswith("# Lab 0:")
    with pytest.raises(SystemExit):
        cli.main(["redraw", "lab9"])
    assert "allowed values" in capsys.readouterr().err

"""A search's MPS daemon starts even where an earlier search, killed before it could stop its daemon, left one
on the same pipe folder; where it still cannot start, the error names the folder and the way out."""
import subprocess

import pytest

from labkit.search import mps


def _fake_control(monkeypatch, failures: int):
    calls = []

    def run(cmd, env=None, check=False, timeout=None, input=None):
        calls.append((tuple(cmd), input))
        if cmd == [mps.CONTROL, "-d"] and sum(c == (tuple(cmd), None) for c in calls) <= failures:
            raise subprocess.CalledProcessError(1, cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(mps.subprocess, "run", run)
    monkeypatch.setattr(mps, "wanted", lambda mode: True)
    return calls


def test_a_daemon_left_on_the_folder_is_asked_to_quit_then_the_search_starts(monkeypatch, tmp_path):
    calls = _fake_control(monkeypatch, failures=1)
    with mps.daemon(tmp_path, "on") as env:
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "pipe")
    starts = [c for c in calls if c[0] == (mps.CONTROL, "-d")]
    quits = [c for c in calls if c == ((mps.CONTROL,), b"quit\n")]
    assert len(starts) == 2 and len(quits) == 2  # the stale daemon's quit, then this search's own at its end


def test_a_daemon_that_still_does_not_start_is_a_clear_error(monkeypatch, tmp_path):
    _fake_control(monkeypatch, failures=2)
    with pytest.raises(RuntimeError, match="does not start.*run with mps off") as err:
        with mps.daemon(tmp_path, "on"):
            pass
    assert str(tmp_path) in str(err.value)

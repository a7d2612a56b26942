"""The CUDA MPS switch of the search workers (labkit.search.mps): True, False or "auto"."""
import pytest

from labkit.search import mps


def test_auto_runs_without_a_daemon_where_there_is_no_gpu_or_binary(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(mps.shutil, "which", lambda name: None)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert mps.wanted("auto") is False
    assert "nvidia-cuda-mps-control is not on the PATH; the workers take turns" in capsys.readouterr().out
    with mps.daemon(tmp_path, enabled="auto") as env:
        assert env == {}
    capsys.readouterr()
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert mps.wanted("auto") is False and capsys.readouterr().out == ""  # a CPU run: nothing to say


def test_auto_wants_the_daemon_where_gpu_and_binary_are(monkeypatch):
    monkeypatch.setattr(mps.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert mps.wanted("auto") is True and mps.wanted(True) is True and mps.wanted("on") is True
    assert mps.wanted(False) is False and mps.wanted("off") is False


def test_true_without_the_binary_is_an_error_and_bad_values_name_the_allowed(monkeypatch, tmp_path):
    monkeypatch.setattr(mps.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="mps on but nvidia-cuda-mps-control is not on the PATH"):
        with mps.daemon(tmp_path, enabled=True):
            pass
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=r"mps=.*: allowed values are True, False, 'on', 'off', 'auto'"):
            mps.wanted(bad)

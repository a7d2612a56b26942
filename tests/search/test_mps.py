"""The CUDA MPS switch of the search workers (labkit.search.mps): True, False or "auto"."""
from pathlib import Path

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


def test_daemon_limits_each_worker_to_a_share_of_the_sms(monkeypatch, tmp_path, capsys):
    """Workers get CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (mps.SM_PERCENT, or LABKIT_MPS_SM_PERCENT); a bad value is
    an error naming the variable and the allowed values, before any daemon starts."""
    started = []
    monkeypatch.setattr(mps.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(mps.subprocess, "run", lambda cmd, **kw: started.append(cmd))
    monkeypatch.delenv(mps.SM_PERCENT_ENV, raising=False)
    with mps.daemon(tmp_path, enabled=True) as env:
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == str(mps.SM_PERCENT)
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "pipe")
    assert f"up to {mps.SM_PERCENT}% of the SMs" in capsys.readouterr().out
    with mps.daemon(tmp_path, enabled=True, share=100, clients="notebooks") as env:  # a caller's own default
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "100"
    assert "for the notebooks" in (out := capsys.readouterr().out) and "each up to 100% of the SMs" in out
    monkeypatch.setenv(mps.SM_PERCENT_ENV, "50")
    for share in (mps.SM_PERCENT, 100):  # the variable decides over either default
        with mps.daemon(tmp_path, enabled=True, share=share) as env:
            assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    started.clear()
    for bad in ("0", "101", "half", "-5"):
        monkeypatch.setenv(mps.SM_PERCENT_ENV, bad)
        with pytest.raises(ValueError, match=r"LABKIT_MPS_SM_PERCENT=.*allowed values are integers 1\.\.100"):
            with mps.daemon(tmp_path, enabled=True):
                pass
    assert started == []  # refused before starting a daemon


def test_a_cuda_share_already_set_is_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(mps.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(mps.subprocess, "run", lambda cmd, **kw: None)
    monkeypatch.delenv(mps.SM_PERCENT_ENV, raising=False)
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "40")
    with mps.daemon(tmp_path, enabled=True) as env:
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"
    monkeypatch.setenv(mps.SM_PERCENT_ENV, "30")  # labkit's own variable decides when both are set
    with mps.daemon(tmp_path, enabled=True) as env:
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"


def test_a_deep_folder_keeps_its_pipes_within_a_socket_paths_limit(tmp_path):
    deep = tmp_path / ("d" * 60) / "runs" / "optuna" / "logs" / "lab2-smoke-random-s0-5527aba8" / "mps"
    pipe = mps.pipe_folder(deep)
    assert len(str(pipe / "control")) < 108 and pipe == mps.pipe_folder(deep)  # short, and the same each time
    assert pipe != mps.pipe_folder(deep.parent)  # one folder per daemon
    shallow = Path("/tmp/runs/mps")
    assert mps.pipe_folder(shallow) == shallow / "pipe"

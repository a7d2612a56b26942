"""labkit.search.host_wait: a search worker's CUDA wait mode (spin or blocking sync), checked and applied."""
import os
import subprocess
import sys

import pytest
import torch

from labkit.search import host_wait, run


def test_mode_default_and_values():
    assert host_wait.mode({}) == "spin"
    assert host_wait.mode({host_wait.ENV: " Block "}) == "block"
    assert host_wait.mode({host_wait.ENV: ""}) == "spin"


def test_bad_mode_names_the_key_and_the_values():
    with pytest.raises(ValueError, match=r"LABKIT_CUDA_WAIT='sleep': allowed values are spin, block"):
        host_wait.mode({host_wait.ENV: "sleep"})


def test_launch_refuses_a_bad_mode_before_starting_workers(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(run.subprocess, "Popen", lambda *a, **k: started.append(a))
    with pytest.raises(ValueError, match="LABKIT_CUDA_WAIT"):
        run.launch([], "journal:x", 2, tmp_path, extra_env={host_wait.ENV: "nap"})
    assert not started and not (tmp_path / "plans.json").exists()


def test_spin_touches_nothing():
    assert "spin" in host_wait.apply({})


@pytest.mark.skipif(host_wait._driver() is not None, reason="this machine has a CUDA driver")
def test_block_without_a_driver_is_an_error_not_a_silent_spin():
    with pytest.raises(RuntimeError, match="no CUDA driver"):
        host_wait.apply({host_wait.ENV: "block"})


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_block_sets_the_primary_context_flag_cuda():
    # a fresh process: the flag must be set before this process's CUDA context exists
    code = ("from labkit.search import host_wait as h; import torch\n"
            "print(h.apply({'LABKIT_CUDA_WAIT': 'block'}))\n"
            "torch.ones(1, device='cuda').sum().item()\n"
            "f, active = h.primary_flags(); print(f, active)\n"
            "assert active and f & h.CU_CTX_SCHED_MASK == h.CU_CTX_SCHED_BLOCKING_SYNC, f\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert "blocking sync" in out.stdout


def test_mps_workers_block_unless_the_user_chose():
    assert host_wait.worker_env(True, {}) == {host_wait.ENV: "block"}
    assert host_wait.worker_env(False, {}) == {}
    assert host_wait.worker_env(True, {host_wait.ENV: "spin"}) == {}  # the user's setting is kept


def test_run_processes_hands_mps_workers_the_blocking_wait(monkeypatch, tmp_path):
    import contextlib

    seen = {}
    monkeypatch.delenv(host_wait.ENV, raising=False)
    monkeypatch.setattr(run._mps, "daemon", lambda folder, enabled: contextlib.nullcontext({"X": "1"}))

    def fake_launch(plans, url, n, log_dir, first_worker=0, extra_env=None):
        seen.update(extra_env)
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "launch", fake_launch)
    with pytest.raises(KeyboardInterrupt):
        run._run_processes([], "journal:x", 2, None, 1.0, True, tmp_path, 0)
    assert seen == {"X": "1", host_wait.ENV: "block"}

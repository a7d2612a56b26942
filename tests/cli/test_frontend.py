"""labkit lab and labkit dashboard without a browser: the command lines they build, the profile they pass
on, the errors they give (tests/browser drives both in Chromium)."""
import json
import subprocess
import sys

import pytest

from labkit import cli
from labkit.cli import frontend
from labkit.run import profiles


def test_lab_command_opens_the_notebooks_folder():
    cmd = frontend.lab_command(port=9999, no_browser=True, extra=["--ServerApp.ip=0.0.0.0"])
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={frontend.NOTEBOOKS}" in cmd and "--port=9999" in cmd and "--no-browser" in cmd
    assert cmd[-1] == "--ServerApp.ip=0.0.0.0"


def test_lab_environment_offline_widgets_and_profile(monkeypatch):
    monkeypatch.setenv("LABKIT_PROGRESS", "lines")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("LABKIT_DATA_SOURCE", raising=False)
    env = frontend.lab_environment("smoke")
    assert env["LABKIT_PROGRESS"] == "bar" and env["HF_HUB_OFFLINE"] == "1" and env["LABKIT_PROFILE"] == "smoke"
    monkeypatch.delenv("LABKIT_PROFILE", raising=False)
    assert "LABKIT_PROFILE" not in frontend.lab_environment("auto")


def test_labkit_profile_is_what_auto_means(monkeypatch):
    monkeypatch.setenv("LABKIT_PROFILE", "smoke")
    assert profiles.resolve_profile("auto") == "smoke" and profiles.resolve_profile("quick") == "quick"
    assert profiles.lab_settings("lab0_graphs_lora", "auto")["profile"] == "smoke"
    monkeypatch.setenv("LABKIT_PROFILE", "fast")
    with pytest.raises(ValueError, match="LABKIT_PROFILE='fast'"):
        profiles.resolve_profile("auto")


def test_kernel_of_this_environment():
    spec = json.loads((frontend.ensure_kernel() / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["display_name"] == frontend.KERNEL_DISPLAY_NAME


def test_dashboard_says_when_a_labs_storage_does_not_exist_yet(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    assert cli.main(["dashboard", "lab3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("labkit: error: dashboard: the study storage ") and "lab3.journal does not exist yet" in err
    assert "Lab 3 notebook creates it" in err and not (tmp_path / "optuna" / "lab3.journal").exists()
    assert cli.main(["dashboard", "--storage", "runs/x.db"]) == 2
    assert "--storage 'runs/x.db': give journal:PATH (one host) or an RDB URL" in capsys.readouterr().err


def test_dashboard_rejects_a_lab_without_studies():
    out = subprocess.run([sys.executable, "-m", "labkit", "dashboard", "lab0"], capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice: 'lab0'" in out.stderr


def test_lab_defaults_quiet_the_news_prompt_where_jupyterlab_reads_them(tmp_path):
    from jupyterlab_server.settings_utils import _get_overrides

    path = frontend.lab_defaults(tmp_path / "settings")
    assert path == tmp_path / "settings" / "overrides.d" / "labkit.json"
    overrides, error = _get_overrides(str(tmp_path / "settings"))
    assert not error
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert frontend.lab_defaults(tmp_path / "settings").read_text() == path.read_text()  # idempotent

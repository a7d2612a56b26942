"""Browser tests: JupyterLab started by ``labkit lab`` (what ``make lab`` runs) and ``labkit dashboard``,
driven through Debian's chromium by Playwright, as a student would use them.

Every test here is marked ``browser`` (``pytest -m 'not browser'`` leaves them out). Where chromium or
playwright is missing they skip, unless ``LABKIT_BROWSER_TESTS=1`` (set by ``.ci/run``) makes that a
failure. Screenshots and the JupyterLab server log go to ``runs/browser-screenshots/`` (or
``$LABKIT_SCREENSHOTS_DIR``).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("lab*_*.ipynb"))
# JupyterLab settings for the test session: every cell attached to the page (so all prompts and outputs can
# be read), no news or update checks (no network), no toasts over the notebook.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        '{"fetchNews": "false", "checkForUpdates": false}',
}


def required() -> bool:
    return os.environ.get("LABKIT_BROWSER_TESTS") == "1"


def _missing(what: str):
    message = f"{what}; the browser tests need it (apt-get install chromium; pip install playwright)"
    if required():
        pytest.fail(message + " and LABKIT_BROWSER_TESTS=1 says they must run", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def screenshots() -> Path:
    folder = Path(os.environ.get("LABKIT_SCREENSHOTS_DIR") or ROOT / "runs" / "browser-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = os.environ.get("LABKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        _missing("no chromium on PATH (nor $LABKIT_CHROMIUM)")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    p.set_default_timeout(60_000)
    yield p
    context.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


class Lab:
    """A JupyterLab server started by ``labkit lab`` on a copy of notebooks/ (saving must not touch the
    committed notebooks), with its own figures and runs folders."""

    def __init__(self, work: Path, log: Path, notebooks: list[Path] = NOTEBOOKS):
        self.work, self.log_path = work, log
        self.notebooks, self.figures, self.runs = work / "notebooks", work / "figures", work / "runs"
        self.notebooks.mkdir(parents=True)
        for nb in notebooks:
            shutil.copy(nb, self.notebooks / nb.name)
        settings = work / "lab-settings"
        for name, text in LAB_SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(text)
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.checks = work / "checks.jsonl"  # every exercise check the notebooks run (labkit.exercises)
        self.env = dict(os.environ, LABKIT_FIGURES_DIR=str(self.figures), LABKIT_RUNS_DIR=str(self.runs),
                        LABKIT_CHECK_LOG=str(self.checks), LABKIT_RECORD_INPUTS=str(work / "inputs.jsonl"),
                        JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"))
        self.env.pop("LABKIT_PROGRESS", None)  # labkit lab sets widgets; the runner's "lines" must not leak in

    def start(self, timeout: float = 180) -> None:
        cmd = [sys.executable, "-m", "labkit", "lab", "--no-browser", "--port", str(self.port),
               "--dir", str(self.notebooks), "--", f"--IdentityProvider.token={self.token}",
               "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0"]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=self.env, cwd=self.work, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # its own group: stopped with JupyterLab below
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"labkit lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            if http_ok(f"{self.base}/api/status?token={self.token}") and http_ok(f"{self.base}/lab?token={self.token}"):
                return
            time.sleep(1)
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def checks_since(self, offset: int) -> list[dict]:
        """The check records logged after byte ``offset`` of the check log."""
        import json

        if not self.checks.exists():
            return []
        with open(self.checks, "rb") as f:
            f.seek(offset)
            return [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]

    def log_tail(self, n: int = 40) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def url(self, path: str) -> str:
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, path: str, method: str = "GET"):
        import json

        req = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        for s in self.api("/api/sessions"):
            self.api(f"/api/sessions/{s['id']}", "DELETE")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # labkit lab and the jupyter server it started
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory, screenshots, chromium_path):
    server = Lab(tmp_path_factory.mktemp("jupyterlab"), screenshots / "jupyterlab-server.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def student_lab(tmp_path_factory, screenshots, chromium_path):
    """JupyterLab on a copy of the student edition (notebooks/student/)."""
    server = Lab(tmp_path_factory.mktemp("student"), screenshots / "jupyterlab-student-server.log",
                 sorted((ROOT / "notebooks" / "student").glob("lab*_*.ipynb")))
    server.start()
    yield server
    server.stop()

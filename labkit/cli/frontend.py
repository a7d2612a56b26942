"""The student's front end: JupyterLab on ``notebooks/`` (``labkit lab``) and optuna-dashboard on a lab's
study storage (``labkit dashboard``)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from .. import settings as _settings

NOTEBOOKS = _settings.REPO_ROOT / "notebooks"
KERNEL_NAME = "python3"  # the notebooks' kernelspec (tools/build_notebooks.py) and papermill's
KERNEL_DISPLAY_NAME = "Python 3 (labkit)"


def _pip_install_lab(missing: list[str]) -> None:
    """Install the ``lab`` extra into this environment, pinned by constraints.txt (a source checkout)."""
    root = _settings.REPO_ROOT
    if not (root / "pyproject.toml").is_file():
        raise RuntimeError(f"{', '.join(missing)} not installed; install them with: {sys.executable} -m pip "
                           "install 'labkit[lab]'")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if (root / "constraints.txt").is_file():
        cmd += ["-c", str(root / "constraints.txt")]
    cmd += ["-e", f"{root}[lab]"]
    print(f"labkit lab: installing {', '.join(missing)} (first use): {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)


def ensure_lab_installed() -> None:
    missing = [name for name, module in (("jupyterlab", "jupyterlab"), ("ipywidgets", "ipywidgets"))
               if importlib.util.find_spec(module) is None]
    if missing:
        _pip_install_lab(missing)
        importlib.invalidate_caches()


def ensure_kernel() -> Path:
    """The ``python3`` kernelspec of this environment, running this Python (installed when missing)."""
    spec_dir = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec = spec_dir / "kernel.json"
    try:
        found = json.loads(spec.read_text())
        ok = (os.path.abspath(found["argv"][0]) == os.path.abspath(sys.executable)
              and found.get("display_name") == KERNEL_DISPLAY_NAME)
    except (OSError, ValueError, KeyError, IndexError):
        ok = False
    if not ok:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME,
                        "--display-name", KERNEL_DISPLAY_NAME], check=True, stdout=subprocess.DEVNULL)
    return spec_dir


LAB_DEFAULTS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def lab_defaults(app_settings: Path | None = None) -> Path:
    """labkit's defaults for JupyterLab in this environment (``overrides.d/labkit.json`` of its app settings, which
    the user's own settings still override): no "be notified about official Jupyter news?" prompt."""
    if app_settings is None:
        from jupyterlab.commands import get_app_dir

        app_settings = Path(get_app_dir()) / "settings"
    path = Path(app_settings) / "overrides.d" / "labkit.json"
    text = json.dumps(LAB_DEFAULTS, indent=1) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def lab_environment(profile: str | None = None) -> dict:
    """The environment JupyterLab and its kernels get: offline by default, as ``labkit run`` does; progress
    as widgets; ``LABKIT_PROFILE`` when a profile was chosen (what ``PROFILE = "auto"`` then means)."""
    env = dict(os.environ)
    if env.get("LABKIT_DATA_SOURCE", "offline") == "offline":
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            env.setdefault(name, "1")
    if env.get("LABKIT_PROGRESS") != "off":  # widgets, even where a runner's "lines" was inherited
        env["LABKIT_PROGRESS"] = "bar"
    # jupyter_core looks in this environment's share/jupyter before the user's (so its python3 kernel wins)
    env.setdefault("JUPYTER_PREFER_ENV_PATH", "1")
    if profile and profile != "auto":
        env["LABKIT_PROFILE"] = profile
    return env


def default_root() -> Path:
    """What ``labkit lab`` opens without ``--dir``: the checkout's notebooks, else the student's folder."""
    if _settings.in_checkout():
        return NOTEBOOKS
    return _settings.workspace() or Path.cwd()


def lab_command(port: int | None = None, no_browser: bool = False, extra: list[str] | None = None,
                root_dir: Path | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root_dir or default_root()}"]
    if port is not None:
        cmd.append(f"--port={port}")
    if no_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # a container's root: jupyter refuses without this
        cmd.append("--allow-root")
    return cmd + list(extra or [])


def run_lab(profile: str | None = None, port: int | None = None, no_browser: bool = False,
            extra: list[str] | None = None, root_dir: Path | None = None) -> int:
    """Install what JupyterLab needs on first use, then run it on ``root_dir`` (``notebooks/``) until it is
    stopped."""
    ensure_lab_installed()
    ensure_kernel()
    lab_defaults()
    cmd = lab_command(port, no_browser, extra, root_dir)
    print(f"labkit lab: JupyterLab on {root_dir or default_root()} with the kernel '{KERNEL_DISPLAY_NAME}' ({sys.executable})"
          + (f", PROFILE \"auto\" means {profile}" if profile and profile != "auto" else "")
          + "; Ctrl-C stops it", flush=True)
    try:
        return subprocess.call(cmd, env=lab_environment(profile))
    except KeyboardInterrupt:
        return 0


# --- optuna-dashboard ---------------------------------------------------------------------------------

def study_storage(lab: str) -> str:
    """``journal:PATH`` of ``lab``'s default study storage (the notebooks' and ``labkit search``'s)."""
    from .. import records  # each notebook search's journal, as labkit.search.storage.default_url names it

    names = records.searches()
    if lab not in names:
        raise KeyError(f"dashboard: {lab!r} has no Optuna studies; allowed: {', '.join(names)}")
    return f"journal:{_settings.runs_dir() / 'optuna' / f'{lab}.journal'}"


def open_storage(url: str, lab: str | None = None):
    """The storage behind ``url`` (journal:PATH, a committed journal:PATH.xz, or an RDB URL, as
    ``labkit.search.make_storage`` takes, opened here without importing the search engine and torch). A bad URL
    or path is one error naming ``--storage`` and the allowed forms; a journal or SQLite file that does not
    exist yet is an error saying where it comes from (never an empty file created behind the student's back)."""
    from ..search.study_storage import open_storage as _open

    if not isinstance(url, str):
        raise TypeError(f"dashboard --storage must be a URL string, got {url!r}")
    if lab and url.startswith("journal:") and not Path(url[len("journal:"):]).is_file():
        raise FileNotFoundError(f"dashboard: the study storage {url[len('journal:'):]} does not exist yet: the "
                                f"{lab.replace('lab', 'Lab ')} notebook creates it when it runs its studies "
                                f"(`labkit run {lab}`); or name another with --storage journal:PATH")
    return _open(url, key="dashboard --storage", create=False)


def serve_dashboard(storage, host: str = "127.0.0.1", port: int = 8080, announce=print) -> None:
    """optuna-dashboard's WSGI app on a threaded server until interrupted; ``port=0`` picks a free port
    (announced in the URL line)."""
    from socketserver import ThreadingMixIn
    import warnings
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    import optuna_dashboard

    # Optuna's PED-ANOVA importance (the dashboard's importance chart) warns on every refresh of a study
    # whose trials all score alike, as smoke studies do; the chart shows the equal importances anyway.
    warnings.filterwarnings("ignore", message="Target and region quantiles select the same set of trials",
                            category=UserWarning)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format, *args):  # one line per request would bury the URL line
            pass

    httpd = make_server(host, port, optuna_dashboard.wsgi(storage), server_class=Server,
                        handler_class=QuietHandler)
    announce(f"http://{host}:{httpd.server_port}/")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()

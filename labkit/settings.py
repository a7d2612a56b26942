"""Where labkit finds data and models and writes caches and figures.

Every location is an environment variable with a default, so CI, a laptop and the GPU kit can each
point labkit somewhere else without code changes.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKSPACE_MARK = ".labkit-workspace"  # `labkit student init DIR` writes it: outputs of an installed labkit go there


def in_checkout() -> bool:
    """labkit runs from the project's checkout (its sources beside the package), not from an installed release."""
    return (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "notebooks" / "src").is_dir()


def workspace(start: Path | None = None) -> Path | None:
    """The student's folder this process works in: the nearest folder at or above ``start`` (the working folder)
    holding ``WORKSPACE_MARK``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / WORKSPACE_MARK).is_file():
            return folder
    return None


def user_dir() -> Path:
    """Where an installed labkit writes outside any student folder: ``$XDG_CACHE_HOME/labkit`` (``~/.cache``)."""
    return (_env_path("XDG_CACHE_HOME") or Path.home() / ".cache") / "labkit"


def output_root() -> Path:
    """The root of the default cache, runs and figures: the checkout's own folder; for an installed labkit the
    student's folder (``workspace()``), else ``user_dir()``: never the installed package."""
    if in_checkout():
        return REPO_ROOT
    return workspace() or user_dir()


def env_number(name: str, allowed: str) -> float | None:
    """``$name`` as a number > 0; None when unset or empty; else a ValueError naming it and ``allowed``."""
    raw = os.environ.get(name, "")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{name}={raw!r}: allowed values are {allowed}")
    return value


@contextlib.contextmanager
def environ(values: dict[str, str | None]):
    """``values`` in this process's environment inside (None: unset), each restored after: what a kernel or worker
    process started inside inherits."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _put(values)
        yield
    finally:
        _put(saved)


def _put(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


DATA_DIR_VARS = ("LABKIT_DATA_DIR", "KIT_DATA_DIR")  # the user's, then the GPU kit's


def data_dir_setting() -> tuple[str, Path] | None:
    """``(variable, folder)`` of the first data-folder variable that is set, or None.

    An explicit folder is used alone: if it lacks the data, that is an error naming the variable, never
    a silent fall-back to another copy.
    """
    for name in DATA_DIR_VARS:
        path = _env_path(name)
        if path is not None:
            return name, path
    return None


def data_dirs() -> list[Path]:
    """Folders searched, in order, for ``imdb/imdb_{train,test}.parquet`` when no variable of
    ``DATA_DIR_VARS`` is set: the checkout's ``data/`` and ``../shared/data``, or for an installed labkit the
    student's folder's."""
    root = REPO_ROOT if in_checkout() else workspace()
    return [root / "data", root.parent / "shared" / "data"] if root else []


def data_source() -> str:
    """``offline`` (parquet files, the default) or ``hub`` (datasets.load_dataset("imdb"))."""
    source = os.environ.get("LABKIT_DATA_SOURCE", "offline")
    if source not in ("offline", "hub"):
        raise ValueError(f"LABKIT_DATA_SOURCE={source!r}: allowed values are 'offline', 'hub'")
    return source


def cache_dir() -> Path:
    path = _env_path("LABKIT_CACHE_DIR") or output_root() / ".cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    return _env_path("LABKIT_FIGURES_DIR") or output_root() / "figures"


def runs_dir() -> Path:
    return _env_path("LABKIT_RUNS_DIR") or output_root() / "runs"


def visible_gpus() -> list[str]:
    """The CUDA devices this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (none without CUDA or torch)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env:
        return [d.strip() for d in env.split(",") if d.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]

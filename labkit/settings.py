"""Where labkit finds data and models and writes caches and figures.

Every location is an environment variable with a default, so CI, a laptop and the GPU kit can each
point labkit somewhere else without code changes.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def data_dirs() -> list[Path]:
    """Folders searched, in order, for ``imdb/imdb_{train,test}.parquet``."""
    dirs = [_env_path("LABKIT_DATA_DIR"), _env_path("KIT_DATA_DIR"), REPO_ROOT / "data",
            REPO_ROOT.parent / "shared" / "data"]
    return [d for d in dirs if d is not None]


def data_source() -> str:
    """``offline`` (parquet files, the default) or ``hub`` (datasets.load_dataset("imdb"))."""
    source = os.environ.get("LABKIT_DATA_SOURCE", "offline")
    if source not in ("offline", "hub"):
        raise ValueError(f"LABKIT_DATA_SOURCE={source!r}: allowed values are 'offline', 'hub'")
    return source


def cache_dir() -> Path:
    path = _env_path("LABKIT_CACHE_DIR") or REPO_ROOT / ".cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def figures_dir() -> Path:
    return _env_path("LABKIT_FIGURES_DIR") or REPO_ROOT / "figures"


def runs_dir() -> Path:
    return _env_path("LABKIT_RUNS_DIR") or REPO_ROOT / "runs"

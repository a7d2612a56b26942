"""Execute lab notebooks headlessly with papermill under a profile.

Each notebook must have a cell tagged ``parameters``; the runner injects ``PROFILE`` (and any overrides),
writes the executed copy to ``runs/<profile>/`` and leaves figures where the notebook saves them
(``figures/<lab>/`` for the full profile, ``figures/<lab>/<profile>/`` otherwise).
"""
from __future__ import annotations

import io
import os
import time
from pathlib import Path

import nbformat

from . import profiles
from .. import settings as _settings
from .profiles import resolve_profile

NOTEBOOKS = _settings.REPO_ROOT / "notebooks"


def lab_notebooks() -> dict[str, Path]:
    """``{"lab0": notebooks/lab0_*.ipynb, ...}``, sorted by lab."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("lab*_*.ipynb")):
        found.setdefault(path.name.split("_", 1)[0], []).append(path)
    return {lab: paths[0] if len(paths) == 1 else paths for lab, paths in found.items()}


def _paths_for(lab: str) -> list[Path]:
    """A lab's notebooks (``lab1``), or one notebook by its name (``lab1_quantize``)."""
    books = lab_notebooks()
    names = {p.stem: p for entry in books.values() for p in (entry if isinstance(entry, list) else [entry])}
    if lab in names:
        return [names[lab]]
    if lab not in books:
        raise KeyError(f"unknown lab or notebook {lab!r}; allowed: labs {', '.join(books) or '(none found)'}, "
                       f"notebooks {', '.join(names)}")
    entry = books[lab]
    return entry if isinstance(entry, list) else [entry]


def check_run(labs: list[str], profile: str, overrides: dict | None = None) -> None:
    """Everything a run can check before any notebook starts: the labs exist and every notebook's settings
    accept ``overrides`` (so a typo fails in a second, not inside a notebook minutes later)."""
    for lab in labs:
        for path in _paths_for(lab):
            if path.stem in profiles.notebooks():
                profiles.lab_settings(path.stem, profile, **(overrides or {}))
            elif overrides:
                raise KeyError(f"{path.name} has no settings to override; notebooks with settings: "
                               f"{', '.join(profiles.notebooks())}")


class NotebookError(RuntimeError):
    """A cell of a notebook raised; the message names the cell and the executed copy holding the traceback."""


def check_parameters_cell(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise ValueError(f"{path}: no cell tagged 'parameters'; papermill could not inject the profile")


class _LabkitLines(io.TextIOBase):
    """A stdout sink for papermill that prints only the notebook's ``[labkit]`` lines."""

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.startswith("[labkit]"):
                print("  " + line, flush=True)
        return len(text)


def run_notebook(path: Path, profile: str, overrides: dict | None = None, output_dir: Path | None = None,
                 progress: bool = True, timeout: int | None = None) -> Path:
    """Execute ``path`` under ``profile`` into ``output_dir``; ``timeout``: seconds a cell may run. A cell that
    raises is a ``NotebookError``; a cell past its time (``nbclient``'s ``CellTimeoutError``) or a kernel that
    died (``DeadKernelError``) propagates with ``labkit_cell``, the index of the cell that was running."""
    import papermill

    from . import engine

    check_parameters_cell(path)
    profile = resolve_profile(profile)
    out_dir = output_dir or _settings.runs_dir() / profile
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    params = {"PROFILE": profile}
    if overrides:
        params["OVERRIDES"] = dict(overrides)
    # The offline world is the default: stop the hub from being tried (and timing out) in every cell.
    if os.environ.get("LABKIT_DATA_SOURCE", "offline") == "offline":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    # Long cells (a search) report progress as "[labkit] ..." lines: echo those to this console, not the
    # whole notebook output (os.environ is inherited by the kernel papermill starts).
    os.environ.setdefault("LABKIT_PROGRESS", "lines")
    try:
        papermill.execute_notebook(str(path), str(out), parameters=params, kernel_name="python3",
                                   progress_bar=progress, cwd=str(path.parent), execution_timeout=timeout,
                                   stdout_file=_LabkitLines(), engine_name=engine.NAME)
    except papermill.PapermillExecutionError as err:
        error = NotebookError(f"{path.name} failed in cell [{err.exec_count}]: {err.ename}: {err.evalue}; the "
                              f"executed copy, traceback included: {out}")
        error.labkit_cell = err.cell_index
        raise error from err
    return out


def run_labs(labs: list[str], profile: str, overrides: dict | None = None, output_dir: Path | None = None,
             progress: bool = True) -> list[tuple[Path, float]]:
    check_run(labs, profile, overrides)
    done = []
    for lab in labs:
        for path in _paths_for(lab):
            start = time.perf_counter()
            print(f"[labkit] running {path.name} (profile {resolve_profile(profile)})", flush=True)
            out = run_notebook(path, profile, overrides, output_dir, progress)
            done.append((out, time.perf_counter() - start))
            print(f"[labkit] {path.name} done in {done[-1][1]:.0f} s -> {out}", flush=True)
    if len(done) > 1:  # the figure-regeneration budget is read off this line (README: make figures)
        total = sum(t for _, t in done)
        print(f"[labkit] {len(done)} notebooks in {total / 60:.1f} min (profile {resolve_profile(profile)}): "
              + ", ".join(f"{out.stem} {t:.0f} s" for out, t in done), flush=True)
    return done

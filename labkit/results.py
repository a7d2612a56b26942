"""Save every figure with a JSON of its numbers and provenance; load stored results back.

Full-profile results go to ``figures/<lab>/`` (committed); smoke and quick ones to
``figures/<lab>/<profile>/`` (git-ignored), so a CPU run never overwrites the GPU numbers.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import torch

from . import settings as _settings
from .training import precision as _precision

LIBRARIES = ("torch", "transformers", "datasets", "peft", "optuna", "numpy", "matplotlib", "labkit")


def git_commit() -> str | None:
    """The code's commit: ``$LABKIT_COMMIT`` when set (a copy without its history, e.g. on a GPU machine,
    is told the commit it was made from), else ``git rev-parse HEAD`` plus ``+dirty`` when tracked files
    other than results (figures/, benchmarks/*.json) differ; None outside a git checkout of its own (a copy
    inside another repository is not that repository's commit; never a placeholder such as "HEAD")."""
    if os.environ.get("LABKIT_COMMIT"):
        given = os.environ["LABKIT_COMMIT"].strip()
        if not re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", given):  # a short sha can become ambiguous later
            raise ValueError(f"LABKIT_COMMIT={given!r}: give the full 40-hex commit (git rev-parse HEAD), "
                             "optionally with '+dirty'")
        return given
    try:
        if not _own_checkout(_settings.REPO_ROOT):
            return None
        head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=_settings.REPO_ROOT,
                              capture_output=True, text=True, timeout=10)
        # results written by the run itself (figures, benchmark JSON) do not make the code dirty
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)figures", ":(exclude)benchmarks/*.json"],
                               cwd=_settings.REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = head.stdout.strip()
    if head.returncode != 0 or len(sha) != 40:
        return None
    return sha + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def _own_checkout(root) -> bool:
    """Whether ``root`` is the top of its own git checkout: a copy without .git inside another repository
    (a kit unpacked in someone's project) would otherwise report that repository's commit."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                         timeout=10)
    return top.returncode == 0 and Path(top.stdout.strip()).resolve() == Path(root).resolve()


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = None
    if out.get("labkit") is None:  # run from a copy on PYTHONPATH (e.g. a GPU machine), not installed
        from . import __version__

        out["labkit"] = __version__
    out["cuda"] = torch.version.cuda
    return out


SHARED_GPU_ENV = "LABKIT_GPU_SHARED"  # set by labkit regenerate --parallel: the other notebooks on the same GPU


def provenance() -> dict:
    """Device, versions, commit, time and platform; ``gpu_shared_with`` where other notebooks ran on the same GPU
    at the time (``LABKIT_GPU_SHARED``), so the run's own timings are not read as if it had the GPU alone."""
    shared = [n for n in os.environ.get(SHARED_GPU_ENV, "").split(",") if n]
    return {"device": device_name(), "versions": versions(), "git_commit": git_commit(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "platform": platform.platform(), **({"gpu_shared_with": shared} if shared else {})}


def result_dir(lab: str, profile: str) -> Path:
    base = _settings.figures_dir() / lab
    return base if profile == "full" else base / profile


def jsonable(obj):
    """JSON for numbers, tensors, paths and dataclasses; NaN/inf written as null (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return jsonable(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "shape", None) == ():
        return jsonable(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return jsonable(dataclasses.asdict(obj))
    return str(obj)


def save_results(lab: str, name: str, numbers: dict, settings: dict, figure: str | None = None) -> Path:
    """Write ``<name>.json``: the numbers, the settings that produced them, and provenance."""
    out = result_dir(lab, settings["profile"])
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    payload = {"lab": lab, "name": name, "figure": figure, "numbers": numbers, "settings": settings,
               "provenance": {**provenance(), **({"precision": _precision.describe(settings)}
                                                 if "device" in settings else {})}}
    return write_json(path, payload, indent=2)


def write_json(path, payload: dict, indent: int = 1) -> Path:
    """Write ``payload`` to ``path`` as strict JSON, with its ``provenance`` (commit, device, versions) added where
    it names none: tensors, numbers and dataclasses made plain (NaN/inf as null), this checkout's paths written
    relative (``portable``). How every benchmark script writes its JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(portable(jsonable({**payload, "provenance": payload.get("provenance")
                                                   or provenance()})), indent=indent) + "\n")
    return path


def portable(obj):
    """``obj`` with every absolute path inside this checkout written relative to it (``journal:/abs/repo/x``
    -> ``journal:x``) and the cache folder as ``$LABKIT_CACHE_DIR``: stored results name no machine's folders."""
    if isinstance(obj, dict):
        return {k: portable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v) for v in obj]
    if isinstance(obj, str) and "/" in obj:
        cache = os.environ.get("LABKIT_CACHE_DIR")
        for folder, shown in ((cache, "$LABKIT_CACHE_DIR/"), (str(_settings.REPO_ROOT), "")):
            if folder:
                obj = obj.replace(folder.rstrip("/") + "/", shown)
    return obj


def _image_bytes(fig, fmt: str) -> bytes:
    """``fig`` as ``fmt``, the same bytes every time it is drawn from the same numbers: no date in an SVG, and its
    element ids salted by a constant (matplotlib draws random ones otherwise)."""
    import io

    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "labkit"}):
        fig.savefig(buf, format=fmt, dpi=130, bbox_inches="tight",
                    metadata={"Date": None} if fmt in ("svg", "pdf") else None)
    return buf.getvalue()


def _save_images(fig, out: Path, name: str, formats) -> dict:
    """Write ``fig``'s images; returns ``(paths, changed)``: whether any file's bytes changed."""
    paths, changed = {}, False
    for fmt in formats:
        paths[fmt] = out / f"{name}.{fmt}"
        data = _image_bytes(fig, fmt)
        if not paths[fmt].is_file() or paths[fmt].read_bytes() != data:
            paths[fmt].write_bytes(data)
            changed = True
    return paths, changed


def save_figure(fig, lab: str, name: str, numbers: dict, settings: dict, formats=("png", "svg")) -> dict:
    """Save a matplotlib figure as ``<name>.<fmt>`` next to ``<name>.json``; returns the paths."""
    out = result_dir(lab, settings["profile"])
    out.mkdir(parents=True, exist_ok=True)
    paths, _ = _save_images(fig, out, name, formats)
    paths["json"] = save_results(lab, name, numbers, settings, figure=f"{name}.{formats[0]}")
    return paths


def redraw_figure(fig, lab: str, name: str, drawn: dict, profile: str = "full", formats=("png", "svg")) -> dict:
    """Replace the images of a stored figure with ``fig``, drawn from stored numbers, without measuring.

    ``<name>.json`` keeps its numbers, settings and provenance (those of the run that measured them) as they
    are; only a ``"drawn"`` block is added or replaced: ``drawn`` (what was drawn from what) plus the commit,
    date, device and matplotlib version of this drawing. Returns the paths."""
    out = result_dir(lab, profile)
    path = out / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored results to re-draw")
    payload = json.loads(path.read_text())
    paths, changed = _save_images(fig, out, name, formats)
    paths["json"] = path
    if not changed and payload.get("figure") == f"{name}.{formats[0]}":
        return paths  # the same images: the figure and its record stay as they are (a redraw is idempotent)
    payload["figure"] = f"{name}.{formats[0]}"
    payload["drawn"] = jsonable({**drawn, "git_commit": git_commit(),
                                  "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                  "device": device_name(), "matplotlib": versions()["matplotlib"]})
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return paths


def store_readings(lab: str, name: str, readings: list[dict], profile: str = "full") -> Path:
    """Write ``readings`` (``labkit.readings``, stored form) into ``<name>.json`` beside its numbers; the numbers,
    settings and provenance stay as the run that measured them wrote them."""
    path = result_dir(lab, profile) / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored results to add readings to")
    payload = json.loads(path.read_text())
    if payload.get("readings") != readings:
        payload["readings"] = readings
        path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def load_results(lab: str, name: str, profile: str = "full") -> dict | None:
    """Stored results (e.g. the committed GPU numbers), or None if that run was never made."""
    path = result_dir(lab, profile) / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def save_answers(lab: str, name: str, markdown: str, profile: str) -> Path:
    """Write ``<name>_answers.md`` beside the lab's results: the prose rendered from them."""
    out = result_dir(lab, profile)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}_answers.md"
    path.write_text(markdown if markdown.endswith("\n") else markdown + "\n")
    return path

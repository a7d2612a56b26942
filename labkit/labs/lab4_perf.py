"""Measure a Lab 4 study on this machine's devices (its figure drawn and saved, ``redraw.show``), and the other
device's stored full-profile result, as the payloads (numbers, settings, provenance) that ``labkit.answers.lab4_perf``
renders (the tables the notebook shows of them are ``labkit.narrate.lab4_perf``'s)."""
from __future__ import annotations

import torch

from .. import redraw
from ..perf import compile_study, sdpa
from ..perf.timing import resolve_devices
from ..results import load_results, result_dir

DEVICES = ("cpu", "cuda")
STUDIES = {"compile": compile_study, "sdpa": sdpa}


def devices(settings: dict) -> list[str]:
    """The devices this run measures (setting ``devices``), after setting the CPU threads the settings ask for."""
    if settings["threads"]:
        torch.set_num_threads(settings["threads"])
    return resolve_devices(settings["devices"])


def measuring(devices: list[str]) -> dict:
    """What this run measures on: its ``devices``, the ``torch`` version and the CPU ``threads``."""
    return {"devices": devices, "torch": torch.__version__, "threads": torch.get_num_threads()}


def show_stored_figure(lab: str, name: str) -> None:
    png = result_dir(lab, "full") / f"{name}.png"
    if png.is_file():
        from IPython.display import Image, display

        display(Image(filename=str(png)))


def measure(name: str, settings: dict, devices: list[str]) -> dict:
    """Run study ``name`` (``STUDIES``) on each of ``devices``, its figure drawn and saved with its JSON.
    Returns {device: payload as saved}."""
    payloads = {}
    for dev in devices:
        redraw.show("lab4_perf", f"{name}_{dev}", STUDIES[name].run_study(settings, dev), settings)
        # read back what was saved, so the answers render from exactly the stored JSON
        payloads[dev] = load_results("lab4", f"{name}_{dev}", settings["profile"])
    return payloads


def with_stored(payloads: dict, name: str, lab: str = "lab4") -> dict:
    """``payloads`` plus, for each device not measured, its stored full-profile result (None when nothing is
    stored), its figure shown: the key beside a student's own measurement."""
    out = dict(payloads)
    for dev in DEVICES:
        if dev not in out:
            out[dev] = load_results(lab, f"{name}_{dev}", "full")
            show_stored_figure(lab, f"{name}_{dev}")
    return out

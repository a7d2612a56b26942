"""Measure a Lab 4 study on this machine's devices (its figure drawn and saved, ``redraw.show``), the tables the
notebook shows of it, and the other device's stored full-profile result, as the payloads (numbers, settings,
provenance) that ``labkit.answers.lab4_perf`` renders."""
from __future__ import annotations

import torch

from .. import redraw
from ..perf import compile_study, sdpa
from ..perf.timing import resolve_devices
from ..report import table
from ..results import load_results, result_dir

DEVICES = ("cpu", "cuda")
STUDIES = {"compile": compile_study, "sdpa": sdpa}
NO_GPU = ("**No CUDA GPU in this run.** It measures the CPU only (the solution edition shows a full-profile GPU "
          "run's stored results beside it).")


def devices(settings: dict) -> list[str]:
    """The devices this run measures (setting ``devices``), after setting the CPU threads the settings ask for."""
    if settings["threads"]:
        torch.set_num_threads(settings["threads"])
    return resolve_devices(settings["devices"])


def measuring_on(devices: list[str]) -> str:
    return f"measuring on: {devices} | torch {torch.__version__} | CPU threads {torch.get_num_threads()}"


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


def compile_tables(payload: dict, dev: str) -> str:
    """The tables of a compile study measured in this run."""
    st = payload["numbers"]
    return (f"### {dev.upper()}: measured in this run on {payload['provenance']['device']}\n\nEvery run:\n\n"
            + table(compile_study.summary_rows(st), floatfmt=".3f")
            + "\n\nCompiled vs eager in the same state and batch (overhead: extra start-up time over eager's; "
            "break-even: overhead / steady saving per call):\n\n"
            + table(compile_study.comparison_rows(st), floatfmt=".3f")
            + "\n\nWhere one steady call spends its time (profiler):\n\n"
            + table(compile_study.share_rows(st), floatfmt=".3f"))


def sdpa_tables(payload: dict, dev: str) -> str:
    """The tables of an attention study measured in this run."""
    st = payload["numbers"]
    return (f"### {dev.upper()}: measured in this run on {payload['provenance']['device']}\n\n{st['dtype']}, batch "
            f"{st['batch']}, {st['heads']} heads, head dim {st['head_dim']}, causal={st['is_causal']}. Memory: "
            f"{st['memory_method']}.\n\nAgreement with a float64 evaluation (batch 0, first heads):\n\n"
            + table(st["checks"], ["is_causal", "mask", "dtype", "naive_vs_float64", "fused_vs_float64",
                                   "naive_vs_fused", "reference_max_abs", "tolerance", "ok"], floatfmt=".2e")
            + f"\n\nEach fused backend forced alone at seq {st['profile_seq']}:\n\n"
            + table(sdpa.backend_rows(st), floatfmt=".3f")
            + "\n\nSequence sweep (steady median):\n\n" + table(sdpa.sweep_rows(st), floatfmt=".3f"))


def profile_tables(payload: dict, dev: str) -> str:
    """The profiler's own tables of an attention study, as torch prints them."""
    prof = payload["numbers"]["profiles"]
    return f"--- {dev}: naive ---\n{prof['naive']['table']}\n--- {dev}: fused ---\n{prof['fused']['table']}"

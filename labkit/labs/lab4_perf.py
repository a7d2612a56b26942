"""Measure a Lab 4 study on this machine's devices and take the other device's stored full-profile result,
as the payloads (numbers, settings, provenance) that ``labkit.answers.lab4_perf`` renders."""
from __future__ import annotations

from ..results import load_results, result_dir, save_figure

DEVICES = ("cpu", "cuda")


def show_stored_figure(lab: str, name: str) -> None:
    png = result_dir(lab, "full") / f"{name}.png"
    if png.is_file():
        from IPython.display import Image, display

        display(Image(filename=str(png)))


def measure(name: str, study_module, settings: dict, devices: list[str], draw, lab: str = "lab4") -> dict:
    """Run ``study_module`` on each of ``devices``, saving its figure (``draw(study)``) and JSON. Returns
    {device: payload as saved}."""
    import matplotlib.pyplot as plt

    payloads = {}
    for dev in devices:
        study = study_module.run_study(settings, dev)
        fig = draw(study)
        save_figure(fig, lab, f"{name}_{dev}", study, settings)
        plt.show()
        plt.close(fig)
        # read back what was saved, so the answers render from exactly the stored JSON
        payloads[dev] = load_results(lab, f"{name}_{dev}", settings["profile"])
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


def measure_or_load(name: str, study_module, settings: dict, devices: list[str], draw, lab: str = "lab4") -> dict:
    """``measure`` on ``devices``, then ``with_stored`` for the other device."""
    return with_stored(measure(name, study_module, settings, devices, draw, lab), name, lab)

"""Lab 2's figures (notebook lab2_search): best-so-far curves of the samplers (mean and min-max over seeds) and
of the compression-aware searches (every trial's value beside the curve), from their stored numbers."""
from __future__ import annotations

import matplotlib.pyplot as plt

from . import trial_axes

STYLES = ("--", "-", "-.", ":")


def plot_samplers(numbers: dict, settings: dict):
    """Each sampler's best accuracy so far: the mean over seeds and a min-max band."""
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    for (sampler, b), style in zip(numbers["bands"].items(), STYLES):
        x = range(1, b["trials"] + 1)
        line, = ax.plot(x, b["mean"], ls=style, marker="o", ms=3, label=f"{sampler} (mean of {len(b['final'])} seeds)")
        ax.fill_between(x, b["min"], b["max"], color=line.get_color(), alpha=0.15)
    trial_axes(ax, "best accuracy so far", f"NAS on IMDb: mean and min-max over seeds (profile {settings['profile']})",
               loc="lower right", fontsize=8)
    return fig


def plot_compression_aware(numbers: dict, settings: dict):
    """Per objective: the best value so far (line) and every trial's value (dots). One study per objective (one
    seed), so there is no band over seeds: the dots show the spread of the trials instead. Where the post-training
    trials recorded their equal-training control (the uncompressed model trained as long), it is drawn as
    crosses at the same trial numbers. The legend sits below the axes, clear of the data."""
    fig, ax = plt.subplots(figsize=(7, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, ys), style, color in zip(numbers["best_so_far"].items(), STYLES, colors):
        ax.plot(range(1, len(ys) + 1), ys, ls=style, marker="o", ms=3, color=color, label=f"{label}: best so far")
        trials = numbers.get("trials", {}).get(label, [])
        vals = [t["value"] for t in trials if t.get("value") is not None][: len(ys)]
        ax.scatter(range(1, len(vals) + 1), vals, s=12, color=color, alpha=0.35, linewidths=0,
                   label=f"{label}: each trial")
        control = [(i, t["accuracy_control"]) for i, t in enumerate(trials[: len(ys)], 1) if "accuracy_control" in t]
        if control:
            ax.scatter(*zip(*control), s=16, marker="x", color="0.25", linewidths=0.8,
                       label=f"{label}: its control (uncompressed, same extra training)")
    trial_axes(ax, "test accuracy", f"Compression-aware search: int{settings['quant_width']} + "
               f"{settings['prune_sparsity']:.0%} L1 pruning, one TPE study per objective (profile {settings['profile']})",
               9, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    return fig

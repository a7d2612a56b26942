"""Lab 3's search figures (notebook lab3_search): Task 1's best-so-far curve against its baselines, the
per-format curves, and accuracy against average weight bits (trials, front, uniform formats, QAT), from their
stored numbers."""
from __future__ import annotations

import itertools

import matplotlib.pyplot as plt

from . import trial_axes

LINES = ("-", "--", "-.", ":")


def plot_search_integer(payload: dict):
    """Task 1's best accuracy so far, beside fp32 and its baselines (queued as the first trials: each one a
    marker, the best a line)."""
    numbers, settings = payload["numbers"], payload["settings"]
    curve, fp32 = numbers["best_so_far"], numbers["fp32"]
    fig, ax = plt.subplots(figsize=(6.8, 4.9))
    ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label="per-layer integer or fp32 (TPE): best so far")
    trials = numbers["trials"][: len(curve)]
    searched = [(i, t["accuracy"]) for i, t in enumerate(trials, 1) if t.get("baseline") is None]
    ax.scatter([i for i, _ in searched], [a for _, a in searched], s=10, color="C0", alpha=0.35, linewidths=0,
               label="each searched trial")
    ax.axhline(fp32, color="k", ls=":", label=f"fp32 {fp32:.4f}")
    base = [(i, t) for i, t in enumerate(trials, 1) if t.get("baseline") is not None]
    ax.scatter([i for i, _ in base], [t["accuracy"] for _, t in base], s=22, marker="D", color="C1", zorder=3,
               label=f"baselines, queued first ({len(base)})")
    if numbers["baselines"]:
        best = max(numbers["baselines"], key=lambda b: b["accuracy"])
        ax.axhline(best["accuracy"], color="C3", ls="--",
                   label=f"best baseline: {best['label']} in every layer {best['accuracy']:.4f}")
    # the legend below the axes: inside it would cover trials near chance that the answers cite
    trial_axes(ax, "accuracy", f"Task 1: per-layer integer width and frac width (profile {settings['profile']})",
               fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    return fig


def plot_search_formats(payload: dict):
    """Best accuracy so far of every per-format search and of the all-formats search: each series its own
    colour and line style (tab10 has 10 colours for 12 series), the legend beside the axes."""
    numbers, settings = payload["numbers"], payload["settings"]
    curves, fp32 = numbers["best_so_far"], numbers["fp32"]
    colors = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(8.2, 4.6))
    for i, (name, ys) in enumerate(curves.items()):  # past 10 series the colours repeat with another line style
        ls, color = LINES[i // len(colors) % len(LINES)], colors[i % len(colors)]
        ax.plot(range(1, len(ys) + 1), ys, ls=ls, color="k" if name == "all formats" else color,
                marker="o" if len(ys) > 1 else "s", ms=3, lw=2.5 if name == "all formats" else 1.3, label=name)
    ax.axhline(fp32, color="0.4", ls=":", label=f"fp32 {fp32:.4f}")
    trial_axes(ax, "best accuracy so far", f"Task 2: per-format searches (fixed-width formats: one configuration; "
               f"profile {settings['profile']})", 9, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    zoom(ax, curves, fp32)
    return fig


def zoom(ax, curves: dict[str, list[float]], fp32: float, chance: float = 0.5, apart: float = 0.05):
    """Zoom the y-axis on the band where the curves end above chance (every search's end within a few points
    of fp32 would otherwise be squeezed into a sliver of a 0.5-0.85 axis), and say what lies below it."""
    ends = [ys[-1] for ys in curves.values() if ys and ys[-1] > chance + apart]
    if not ends:
        return
    inside = [y for ys in curves.values() for y in ys if y >= min(ends)] + [fp32]
    lo, hi = min(inside), max(inside)
    pad = max(0.1 * (hi - lo), 0.001)
    ax.set_ylim(lo - pad, hi + pad)
    below = [f"{name} {ys[-1]:.4f}" for name, ys in curves.items() if ys and ys[-1] < lo - pad]
    early = [name for name, ys in curves.items() if ys and ys[-1] >= lo - pad and min(ys) < lo - pad]
    note = f"zoomed: chance is {chance}"
    if below:
        note += "; below the axis: " + ", ".join(below)
    if early:
        note += "; earlier trials below the axis: " + ", ".join(early)
    ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=6.5, va="bottom", color="0.3", wrap=True)


def plot_search_pareto(payload: dict):
    """Accuracy against average weight bits: every measured configuration (grey), the front over all of them
    (a step line), each uniform format its own marker in the legend (no labels on the data to overprint),
    and the QAT'd front configurations (stars, arrows from their PTQ accuracy)."""
    numbers, settings = payload["numbers"], payload["settings"]
    fp32 = numbers["fp32"]
    fig, ax = plt.subplots(figsize=(8.6, 5.0))
    cloud = numbers["cloud"]
    ax.scatter([p["bits"] for p in cloud], [p["accuracy"] for p in cloud], s=7, color="0.78",
               label=f"every configuration measured ({len(cloud)})")
    front = numbers["front_all"]
    ax.step([p["bits"] for p in front], [p["accuracy"] for p in front], where="post", marker="o", ms=4, color="C0",
            label="Pareto front (PTQ), every study's trials")
    markers = itertools.cycle("xP^vsD<>pHd*")
    colors = itertools.cycle(plt.get_cmap("tab10").colors)
    for u in sorted(numbers["uniform"], key=lambda u: (u["bits"], u["accuracy"])):
        ax.scatter(u["bits"], u["accuracy"], marker=next(markers), color=next(colors), s=36, zorder=3,
                   label=f"{u['format']} in every layer ({u['accuracy']:.3f})")
    qat = numbers["qat"]
    for q in qat:
        ax.annotate("", xy=(q["bits"], q["accuracy"]), xytext=(q["bits"], q["ptq"]),
                    arrowprops=dict(arrowstyle="->", color="C2"))
    if qat:
        ax.scatter([q["bits"] for q in qat], [q["accuracy"] for q in qat], marker="*", s=90, color="C2", zorder=4,
                   label="front configurations after QAT")
    ax.axhline(fp32, color="k", ls=":", label=f"fp32 {fp32:.4f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("average weight bits (log scale)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"Accuracy vs average weight bits (profile {settings['profile']})", fontsize=10)
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig

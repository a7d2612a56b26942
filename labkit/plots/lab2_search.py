"""Lab 2's figures (notebook lab2_search): best-so-far curves of the samplers (mean and min-max over seeds) and
of the compression-aware searches (every trial's value beside the curve), each from its payload
(``{"numbers", "settings", "provenance"}``, a stored result's shape)."""
from __future__ import annotations

import matplotlib.pyplot as plt

from . import trial_axes

STYLES = ("--", "-", "-.", ":")


def plot_samplers(payload: dict):
    """Left: each sampler's best accuracy so far, the mean over seeds and a min-max band. Right, zoomed to the
    final bests, where the samplers' differences lie: each seed's final best (dots), the mean with two standard
    errors over seeds (thick bar) and with the test set's error added (thin bar), as the samplers' reading
    compares them (``labkit.readings.lab2_search``)."""
    from ..readings.lab2_search import n_test
    from ..readings.stats import accuracy_se

    numbers, settings = payload["numbers"], payload["settings"]
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    n = n_test(numbers.get("trials") or {}, settings)
    for i, ((sampler, b), style, color) in enumerate(zip(numbers["bands"].items(), STYLES, colors)):
        x = range(1, b["trials"] + 1)
        ax.plot(x, b["mean"], ls=style, marker="o", ms=3, color=color, label=f"{sampler} (mean of {len(b['final'])} seeds)")
        ax.fill_between(x, b["min"], b["max"], color=color, alpha=0.15)
        finals, mean = b["final"], b["final_mean"]
        zoom.scatter([i] * len(finals), finals, s=18, color=color, alpha=0.6, linewidths=0)
        seed_se = b["final_sem"] if b["final_sem"] is not None and len(finals) > 1 else 0.0
        both = (seed_se ** 2 + accuracy_se(mean, n) ** 2) ** 0.5
        zoom.errorbar(i + 0.18, mean, yerr=2 * both, fmt="none", ecolor=color, elinewidth=0.8, capsize=3)
        zoom.errorbar(i + 0.18, mean, yerr=2 * seed_se, fmt="o", ms=4, color=color, elinewidth=2.5)
    trial_axes(ax, "best accuracy so far", f"NAS on IMDb: mean and min-max over seeds (profile {settings['profile']})",
               xlabel="trials completed", loc="lower right", fontsize=8)
    zoom.set_xticks(range(len(numbers["bands"])), list(numbers["bands"]))
    zoom.set_xlim(-0.5, len(numbers["bands"]) - 0.3)
    zoom.set_ylabel("final best accuracy")
    zoom.set_title(f"Final bests (zoomed): seeds, mean ± 2 SE over\nseeds (thick), with {n:,} test reviews (thin)",
                   fontsize=8)
    zoom.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_compression_aware(payload: dict):
    """Per objective: the best value so far (line) and every trial's value (dots). One study per objective (one
    seed), so there is no band over seeds: the dots show the spread of the trials instead. Where the post-training
    trials recorded their equal-training control (the uncompressed model trained as long), it is drawn as
    crosses at the same trial numbers. The legend sits below the axes, clear of the data."""
    numbers, settings = payload["numbers"], payload["settings"]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, ys), style, color in zip(numbers["best_so_far"].items(), STYLES, colors):
        trials = [t for t in numbers.get("trials", {}).get(label, []) if t.get("value") is not None][: len(ys)]
        # x: each trial's own number (Optuna's, from 0), as the answers cite them ("trial 11")
        xs = [t.get("number", i) for i, t in enumerate(trials)] + list(range(len(trials), len(ys)))
        ax.plot(xs[: len(ys)], ys, ls=style, marker="o", ms=3, color=color, label=f"{label}: best so far")
        ax.scatter(xs[: len(trials)], [t["value"] for t in trials], s=12, color=color, alpha=0.35, linewidths=0,
                   label=f"{label}: each trial")
        control = [(x, t["accuracy_control"]) for x, t in zip(xs, trials) if "accuracy_control" in t]
        if control:
            ax.scatter(*zip(*control), s=16, marker="x", color="0.25", linewidths=0.8,
                       label=f"{label}: its control (uncompressed, same extra training)")
    trial_axes(ax, "test accuracy", f"Compression-aware search: int{settings['quant_width']} + "
               f"{settings['prune_sparsity']:.0%} L1 pruning, one TPE study per objective (profile {settings['profile']})",
               9, xlabel="trial (its number, from 0)", fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14),
               ncol=2, frameon=False)
    return fig

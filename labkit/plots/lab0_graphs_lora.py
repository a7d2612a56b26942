"""Lab 0's accuracy figure: untrained, SFT, its equal-training control, LoRA and merged LoRA."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..readings import seeds as _seeds

# The course's results with prajjwal1/bert-tiny (another model: drawn as context lines only).
COURSE = {"course SFT (bert-tiny)": 0.788, "course LoRA (bert-tiny)": 0.823}
COLORS = {"untrained": "#999", "SFT": "#4c72b0", "SFT + 1 epoch": "#8172b3", "LoRA": "#dd8452",
          "LoRA merged": "#c44e52"}


def plot_accuracy(payload: dict):
    """Bars of the mean accuracy over training seeds, each seed a dot on its bar (``payload``: a stored result,
    ``{"numbers", "settings", "provenance"}``)."""
    numbers, settings = payload["numbers"], payload["settings"]
    acc, k = numbers["accuracy"], _seeds.count(numbers)
    names = [n for n in COLORS if n in acc]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    bars = ax.bar(names, [acc[n] for n in names], color=[COLORS[n] for n in names], alpha=0.85)
    ax.bar_label(bars, fmt="%.4f", fontsize=8)
    if k > 1:
        for i, n in enumerate(names):
            ax.scatter([i] * k, _seeds.values(acc, n, k), s=12, color="k", zorder=3,
                       label="each training seed" if i == 0 else None)
    for label, y in COURSE.items():
        ax.axhline(y, ls="--", lw=0.8, color="k")
        ax.text(-0.4, y + 0.005, label, fontsize=7)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("IMDb test accuracy")
    ax.set_title(f"{settings['model']}, {numbers['dataset_sizes']['test']:,} test reviews, profile "
                 f"{settings['profile']}; " + (f"means of {k} training seeds" if k > 1 else "one training seed"),
                 fontsize=9)
    if k > 1:
        ax.legend(fontsize=7, loc="upper right")
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig

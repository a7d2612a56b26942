"""Lab 3 part 1's figures: weight SNR against bits per weight, and PTQ / QAT accuracy per format."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..records.lab3_formats import snr_widths
from ..quant.study import STUDY_ORDER
from ..readings import seeds as _seeds


def format_colors(names) -> dict:
    return dict(zip(names, plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]))


def plot_weight_snr(payload: dict):
    """Weight SNR per format and width; a per-tensor-fitted variant dashed in its format's colour."""
    rows, settings = payload["numbers"]["rows"], payload["settings"]
    colors = format_colors([n for n in STUDY_ORDER if any(r["format"] == n for r in rows)])
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for label in dict.fromkeys(r["format"] for r in rows):
        pts = sorted((r["bits"], r["snr_db"]) for r in rows if r["format"] == label)
        xs, ys = zip(*pts)
        ax.plot(xs, ys, "--" if "fit" in label else "-", marker="o" if len(pts) > 1 else "s", ms=4, label=label,
                color=colors[label.split(" ")[0]])
    ax.set_xlabel("bits per weight (shared exponents and scales included)")
    ax.set_ylabel("weight SNR (dB)")
    ax.set_title(f"Linear weights of the SFT model ({settings['model']}), widths {snr_widths(settings)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig


def plot_formats(payload: dict):
    """Mean PTQ and QAT accuracy per format (bars), each training seed a dot, fp32's mean as a line."""
    numbers, settings = payload["numbers"], payload["settings"]
    formats, k = numbers["formats"], _seeds.count(numbers)
    names = list(formats)
    fig, ax = plt.subplots(figsize=(10, 4.4))
    x = np.arange(len(names))
    for off, stage, color, label in ((-0.2, "ptq", "#4c72b0", "PTQ"),
                                     (0.2, "qat", "#dd8452", f"QAT ({settings['qat_epochs']} epochs)")):
        means = [formats[n][stage]["accuracy"] for n in names]
        bars = ax.bar(x + off, np.nan_to_num(np.array(means, dtype=float)), 0.4, label=label, color=color)
        ax.bar_label(bars, labels=[f"{m:.3f}" if m == m else "-" for m in means], fontsize=6, rotation=90, padding=2)
        if k > 1:
            for i, n in enumerate(names):
                ax.scatter([i + off] * k, _seeds.values(formats[n][stage], "accuracy", k), s=7, color="k", zorder=3,
                           label="each training seed" if i == 0 and stage == "ptq" else None)
    fp32 = numbers["fp32"]["accuracy"]
    ax.axhline(fp32, ls="--", color="k", lw=0.8, label=f"fp32 {fp32:.3f}")
    ax.set_xticks(x, [f"{n}\n{formats[n]['bits']['weight_bits']:.2f} b" for n in names], rotation=45, ha="right",
                  fontsize=7)
    ax.set_ylim(0.0, 1.08)
    ax.set_ylabel("IMDb test accuracy")
    ax.set_title(f"Every Linear quantized (input, weight, bias; binary formats: bias fp32), width "
                 f"{settings['format_width']}; {numbers['dataset_sizes']['test']:,} test reviews, profile "
                 f"{settings['profile']}; " + (f"means of {k} training seeds" if k > 1 else "one training seed"),
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper center", ncol=4)
    fig.tight_layout()
    return fig

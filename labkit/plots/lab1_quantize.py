"""Lab 1a's figure, drawn from the numbers its JSON stores (so a committed figure can be re-drawn without
re-measuring: python -m labkit.redraw lab1_quantize --figures), and the parts Lab 1b's figure draws alike:
each seed's dots and the uncompressed baseline's lines."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..readings import seeds as _seeds


def seed_points(ax, xs, rows, key: str, k: int, color, marker="o") -> None:
    """Each training seed's value of ``key`` as a small dot at ``xs`` (nothing for a one-seed result): the
    lines are means, the dots show how far seeds spread around them."""
    if k < 2:
        return
    for x, r in zip(xs, rows):
        ax.scatter([x] * k, _seeds.values(r, key, k), s=10, color=color, marker=marker, alpha=0.5, linewidths=0,
                   zorder=3)


def plot_quantization(payload: dict):
    """PTQ and QAT accuracy per fixed-point width, fp32 and (when measured) the equal-training control."""
    numbers, settings = payload["numbers"], payload["settings"]
    rows, k = numbers["rows"], _seeds.count(numbers)
    widths = [r["width"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for key, marker, color, label in (("ptq", "o", "#4c72b0", "PTQ"),
                                      ("qat", "s", "#dd8452", f"QAT ({settings['qat_epochs']:g} epoch)")):
        ax.plot(widths, [r[key] for r in rows], marker + "-", color=color, label=label)
        seed_points(ax, widths, rows, key, k, color, marker)
    ax.set_xticks(widths)
    return finish(fig, ax, numbers, ("fp32", "fp32 + {epochs:g} epoch, no quantizer"),
                  "fixed-point width (frac widths calibrated per tensor)",
                  f"Fixed-point quantization of every Linear ({settings['model']}, profile {settings['profile']})")


def finish(fig, ax, numbers: dict, names: tuple[str, str], xlabel: str, title: str):
    """The uncompressed baseline and (when measured) its equal-training control as horizontal lines, axes
    labels, and the legend below the axes where it hides no point."""
    fp32, k = numbers["fp32"], _seeds.count(numbers)
    ax.axhline(fp32, ls="--", color="k", lw=0.8, label=f"{names[0]} ({fp32:.3f})")
    if numbers.get("control"):
        c = numbers["control"]
        ax.axhline(c["accuracy"], ls=":", color="k", lw=1.2,
                   label=f"{names[1].format(epochs=c['epochs'])} ({c['accuracy']:.3f})")
    ax.set(xlabel=xlabel, ylabel="IMDb test accuracy",
           title=title + (f"\nlines: means of {k} training seeds; dots: each seed" if k > 1 else ", one training seed"))
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    return fig

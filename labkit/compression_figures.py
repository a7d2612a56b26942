"""Lab 1's figures, drawn from the numbers its JSON stores (so a committed figure can be re-drawn without
re-measuring: tools/redraw_figures.py lab1)."""
from __future__ import annotations

import matplotlib.pyplot as plt


def plot_quantization(numbers: dict, settings: dict):
    """PTQ and QAT accuracy per fixed-point width, fp32 and (when measured) the equal-training control."""
    rows = numbers["rows"]
    widths = [r["width"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.6))
    ax.plot(widths, [r["ptq"] for r in rows], "o-", label="PTQ")
    ax.plot(widths, [r["qat"] for r in rows], "s-", label=f"QAT ({settings['qat_epochs']:g} epoch)")
    ax.set_xticks(widths)
    return _finish(fig, ax, numbers, ("fp32", "fp32 + {epochs:g} epoch, no quantizer"),
                   "fixed-point width (frac widths calibrated per tensor)",
                   f"Fixed-point quantization of every Linear ({settings['model']}, profile {settings['profile']})")


def plot_pruning(numbers: dict, settings: dict):
    """Accuracy right after pruning and after fine-tuning per sparsity, one colour per method and scope;
    series are offset a little along x so points at the same accuracy (e.g. 0.5) stay visible."""
    rows = numbers["rows"]
    main = settings["prune_scope"]
    series = [("random", main, "#c44e52", "o"), ("l1-norm", main, "#4c72b0", "s"),
              ("l1-norm", "global" if main == "local" else "local", "#55a868", "^")]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for k, (method, scope, color, marker) in enumerate(series):
        sel = [r for r in rows if r["method"] == method and r.get("scope", main) == scope]
        if not sel:
            continue
        xs = [r["sparsity"] + (k - 1) * 0.008 for r in sel]
        ax.plot(xs, [r["pruned"] for r in sel], marker + "--", color=color, alpha=0.55, mfc="none",
                label=f"{method} ({scope}), pruned")
        ax.plot(xs, [r["finetuned"] for r in sel], marker + "-", color=color,
                label=f"{method} ({scope}), + {settings['prune_epochs']:g} epoch")
    return _finish(fig, ax, numbers, ("unpruned", "unpruned + {epochs:g} epoch"), "sparsity (weights and activations)",
                   f"Unstructured pruning (profile {settings['profile']})")


def _finish(fig, ax, numbers: dict, names: tuple[str, str], xlabel: str, title: str):
    """The uncompressed baseline and (when measured) its equal-training control as horizontal lines, axes
    labels, and the legend below the axes where it hides no point."""
    fp32 = numbers["fp32"]
    ax.axhline(fp32, ls="--", color="k", lw=0.8, label=f"{names[0]} ({fp32:.3f})")
    if numbers.get("control"):
        c = numbers["control"]
        ax.axhline(c["accuracy"], ls=":", color="k", lw=1.2,
                   label=f"{names[1].format(epochs=c['epochs'])} ({c['accuracy']:.3f})")
    ax.set(xlabel=xlabel, ylabel="IMDb test accuracy", title=title)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    return fig

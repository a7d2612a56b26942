"""Lab 1b's figure, drawn from the numbers its JSON stores (so a committed figure can be re-drawn without
re-measuring: python -m labkit.redraw lab1_prune --figures); seed dots and baseline lines as Lab 1a draws them."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..readings import seeds as _seeds
from .lab1_quantize import finish, seed_points


def plot_pruning(payload: dict):
    """Accuracy right after pruning and after fine-tuning per sparsity, one colour per method and scope;
    series are offset a little along x so points at the same accuracy (e.g. 0.5) stay visible."""
    numbers, settings = payload["numbers"], payload["settings"]
    rows, k = numbers["rows"], _seeds.count(numbers)
    main = settings["prune_scope"]
    series = [("random", main, "#c44e52", "o"), ("l1-norm", main, "#4c72b0", "s"),
              ("l1-norm", "global" if main == "local" else "local", "#55a868", "^")]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for i, (method, scope, color, marker) in enumerate(series):
        sel = [r for r in rows if r["method"] == method and r.get("scope", main) == scope]
        if not sel:
            continue
        xs = [r["sparsity"] + (i - 1) * 0.008 for r in sel]
        ax.plot(xs, [r["pruned"] for r in sel], marker + "--", color=color, alpha=0.55, mfc="none",
                label=f"{method} ({scope}), pruned")
        ax.plot(xs, [r["finetuned"] for r in sel], marker + "-", color=color,
                label=f"{method} ({scope}), + {settings['prune_epochs']:g} epoch")
        seed_points(ax, xs, sel, "pruned", k, color, marker)
        seed_points(ax, xs, sel, "finetuned", k, color, marker)
    return finish(fig, ax, numbers, ("unpruned", "unpruned + {epochs:g} epoch"), "sparsity (weights and activations)",
                  f"Unstructured pruning (profile {settings['profile']})")

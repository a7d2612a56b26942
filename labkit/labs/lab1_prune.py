"""The ``lab1.l1_mask`` exercise's mask on one layer beside the one labkit's ``prune`` puts there, as the rows
Lab 1b's notebook shows (``labkit.narrate.lab1_prune`` draws them and the sweep's table)."""
from __future__ import annotations

import torch

from ..prune import prune


def mask_rows(layer: torch.nn.Linear, sparsities, l1_mask) -> list[dict]:
    """One row per sparsity: what ``l1_mask`` (the exercise's, or labkit's) prunes of ``layer``'s weight
    beside the local L1-norm mask of labkit's ``prune``, and the pruned / kept magnitudes at the cut."""
    rows = []
    with torch.no_grad():
        w = layer.weight.detach()
        for sparsity in sparsities:
            mine = l1_mask(w, sparsity)
            held = prune(torch.nn.ModuleDict({"layer": layer}), {"weight": {"sparsity": sparsity, "method": "l1-norm"}})
            theirs = held.model["layer"].parametrizations.weight[0].mask
            rows.append({"sparsity": sparsity, "achieved (yours)": float((~mine).sum()) / w.numel(),
                         "achieved (labkit's prune)": float((~theirs).sum()) / w.numel(),
                         "entries that differ": int((mine != theirs).sum()),
                         "largest pruned abs(w)": f"{float(w.abs()[~mine].max()):.7g}" if (~mine).any() else "-",
                         "smallest kept abs(w)": f"{float(w.abs()[mine].min()):.7g}" if mine.any() else "-"})
    return rows


def mask_check(model, sparsities, l1_mask) -> dict:
    """``mask_rows`` of ``model``'s first Linear, with the ``layer``'s name and its number of ``weights``."""
    name, layer = next((n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear))
    return {"layer": name, "weights": layer.weight.numel(), "rows": mask_rows(layer, sparsities, l1_mask)}

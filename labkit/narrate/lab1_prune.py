"""What Lab 1b's notebook shows beside its figure: the sparsity sweep's table, and the ``lab1.l1_mask`` exercise's
mask on one layer beside labkit's (``labs.lab1_prune.mask_check``)."""
from __future__ import annotations

from ..report import table

SWEEP_COLUMNS = ["method", "scope", "sparsity", "achieved_weight_sparsity", "achieved_activation_sparsity",
                 "pruned", "finetuned", "pruned_positive_share", "finetuned_positive_share"]
MASK_COLUMNS = ["sparsity", "achieved (yours)", "achieved (labkit's prune)", "entries that differ",
                "largest pruned abs(w)", "smallest kept abs(w)"]


def sweep_table(numbers: dict) -> str:
    return table(numbers["rows"], SWEEP_COLUMNS)


def mask_text(mask: dict) -> str:
    """``labs.lab1_prune.mask_check``'s rows as a table under the layer's name and size."""
    return f"Layer `{mask['layer']}` ({mask['weights']:,} weights):\n\n" + table(mask["rows"], MASK_COLUMNS)

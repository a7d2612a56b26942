"""What Lab 3's search notebook says while it runs: its base, what the searches cost and how their trials ran."""
from __future__ import annotations

from .runs import how_trials_ran


def base_text(base: dict) -> str:
    """``labs.lab3_search.base_numbers``: the SFT model, its fp32 accuracy, the layers searched, the studies."""
    return (f"Base: the SFT model (weights sha256 `{base['sft_digest'][:12]}`), fp32 accuracy **{base['fp32']:.4f}** "
            f"on {base['n_test']:,} test reviews; {base['layers']} Linear layers searched. Studies in "
            f"`{base['storage']}` (tag `{base['tag']}`).")


def cost_text(cost: dict) -> str:
    """How long the searches and the QAT took here, how many trials reused a measured configuration, and how the
    trials ran (``labs.lab3_search.search_cost``)."""
    return (f"- **Cost of the search.** {cost['search_seconds'] / 60:.1f} min for the searches and "
            f"{cost['qat_seconds'] / 60:.1f} min for the QAT here (a resumed run counts only what was left); "
            f"{cost['cached']} of {cost['trials']} trials reused a measured configuration. "
            + how_trials_ran(cost["provenance"]))

"""Helpers for tests that doctor stored results."""


def one_seed(x):
    """A stored result reduced to its means (as results were stored before seeds were kept), for doctoring."""
    if isinstance(x, dict):
        return {k: one_seed(v) for k, v in x.items() if k != "seeds" and not k.endswith("_seeds")}
    return [one_seed(v) for v in x] if isinstance(x, list) else x

"""Results over training seeds: per-seed numbers combined into one.

A lab trains one model per training seed and stores ``combine(per_seed)``: every measured float becomes
the mean over seeds with the seeds' own values beside it (``<key>_seeds``), so the means read like a
one-seed result and the spread is never lost. ``values`` gives a key's per-seed values back (a one-seed
result, or a float equal in every seed, repeats its value). How two such results are compared lives in
``labkit.readings.stats``.
"""
from __future__ import annotations

import math

SUFFIX = "_seeds"


def combine(per_seed: list[dict], seeds: list[int]) -> dict:
    """One numbers dict from per-seed dicts of the same shape (see the module docstring); ``seeds`` names
    them and is stored as ``seeds``."""
    if not per_seed or len(per_seed) != len(seeds):
        raise ValueError(f"combine: {len(per_seed)} results for seeds {seeds}")
    return {**_merge(per_seed, "numbers"), "seeds": list(seeds)}


def _merge(items: list[dict], where: str) -> dict:
    keys = list(items[0])
    if any(list(x) != keys for x in items[1:]):
        raise ValueError(f"combine: {where} has other keys in another seed")
    out = {}
    for k in keys:
        vals = [x[k] for x in items]
        if _floats(vals):
            if len(set(vals)) > 1 or any(math.isnan(v) for v in vals):
                out[k], out[k + SUFFIX] = _mean(vals), vals
            else:
                out[k] = vals[0]
        elif all(isinstance(v, dict) for v in vals):
            out[k] = _merge(vals, f"{where}.{k}")
        elif (all(isinstance(v, list) and v and all(isinstance(e, dict) for e in v) for v in vals)
              and len({len(v) for v in vals}) == 1):  # rows: element by element
            out[k] = [_merge([v[i] for v in vals], f"{where}.{k}[{i}]") for i in range(len(vals[0]))]
        elif all(v == vals[0] for v in vals[1:]):
            out[k] = vals[0]
        else:  # anything else that differs between seeds (a digest, a loss curve): the first, and all
            out[k], out[k + SUFFIX] = vals[0], vals
    return out


def _floats(vals) -> bool:
    return all(isinstance(v, float) for v in vals)


def _mean(vals: list[float]) -> float:
    finite = [v for v in vals if not math.isnan(v)]
    return sum(vals) / len(vals) if len(finite) == len(vals) else float("nan")


def count(numbers: dict) -> int:
    """How many training seeds a stored result holds (one for results stored before seeds were kept)."""
    return len(numbers.get("seeds") or [None])


def values(d: dict, key: str, k: int) -> list[float]:
    """The ``k`` per-seed values of ``key`` in a combined dict ``d``."""
    got = d.get(key + SUFFIX)
    if got is not None:
        if len(got) != k:
            raise ValueError(f"{key}: {len(got)} per-seed values, expected {k}")
        return list(got)
    return [d[key]] * k

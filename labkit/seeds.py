"""Results over training seeds: per-seed numbers combined into one, and differences whose uncertainty
includes the seed.

A lab trains one model per training seed and stores ``combine(per_seed)``: every measured float becomes
the mean over seeds with the seeds' own values beside it (``<key>_seeds``), so the means read like a
one-seed result and the spread is never lost. ``values`` gives a key's per-seed values back (a one-seed
result, or a float equal in every seed, repeats its value).

How a difference is judged (``difference``): per seed, d_s = a_s - b_s; over k seeds the mean d. Its
standard error combines

- the spread over seeds: sd(d_s) / sqrt(k) (what another set of training seeds would move), and
- the test set's: sqrt(pa (1 - pa) / n + pb (1 - pb) / n) for accuracies on n test reviews (unpaired, so
  conservative; every seed is scored on the same reviews, so it does not shrink with k),

as se = sqrt(se_seed^2 + se_test^2). A difference is **established** when every seed's difference has the
same sign and |d| > 2 se; a difference whose sign changes between seeds is never established. With one
training seed (the quick profile) the seed spread is unknown: a difference is then judged on the test-set
error alone, and every verdict says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Difference:
    """a - b over seeds: ``mean``, ``per_seed``, the standard errors (``se_seed`` is NaN for one seed) and the
    verdict (``established``; ``sign_changes``: some seeds disagree on the sign)."""
    mean: float
    per_seed: tuple[float, ...]
    se_seed: float
    se_test: float
    se: float
    established: bool
    sign_changes: bool

    @property
    def seeds(self) -> int:
        return len(self.per_seed)

    def verdict(self) -> str:
        """``established``, or why not: one seed, the sign changes between seeds, or within 2 SE."""
        if self.seeds < 2:
            return (f"{'beyond' if self.established else 'within'} 2 test-set SE; one training seed, so its spread "
                    "is not measured")
        if self.established:
            return "established"
        if self.sign_changes:
            return "not established (the sign changes between seeds)"
        return "not established (within 2 SE)"

    def text(self) -> str:
        """E.g. ``+0.0040 +- 0.0021 (seeds +0.0031/+0.0052/+0.0037; established)``."""
        if self.seeds < 2:
            return f"{self.mean:+.4f} ± {self.se_test:.4f} test-set SE, one seed"
        per = "/".join(f"{d:+.4f}" for d in self.per_seed)
        return f"{self.mean:+.4f} ± {self.se:.4f} (per seed {per}; {self.verdict()})"


def accuracy_se(p: float, n: int) -> float:
    """One standard error of an accuracy ``p`` measured on ``n`` test reviews."""
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n else float("nan")


def at_chance(accuracy: float, n: int) -> bool:
    """Within two standard errors of 0.5 on ``n`` test reviews: the model answers one class."""
    return abs(accuracy - 0.5) <= 2 * accuracy_se(0.5, n)


def difference(a: list[float], b: list[float] | float, n: int | None) -> Difference:
    """``a - b`` per seed (``b`` may be a constant), judged as the module docstring says; ``n``: test reviews
    behind each accuracy (None: no test-set error, e.g. for non-accuracies)."""
    bs = [float(b)] * len(a) if isinstance(b, (int, float)) else list(b)
    if len(bs) != len(a) or not a:
        raise ValueError(f"difference: {len(a)} and {len(bs)} per-seed values")
    d = [x - y for x, y in zip(a, bs)]
    k = len(d)
    mean = sum(d) / k
    se_seed = math.sqrt(sum((x - mean) ** 2 for x in d) / (k - 1) / k) if k > 1 else float("nan")
    if n:
        pa, pb = sum(a) / k, sum(bs) / k
        var_b = 0.0 if isinstance(b, (int, float)) else accuracy_se(pb, n) ** 2
        se_test = math.sqrt(accuracy_se(pa, n) ** 2 + var_b)
    else:
        se_test = 0.0
    se = math.sqrt(se_seed ** 2 + se_test ** 2) if k > 1 else float("nan")
    signs = {(x > 0) - (x < 0) for x in d}
    sign_changes = len(signs - {0}) > 1 or (0 in signs and len(signs) > 1)
    if k > 1:
        established = not sign_changes and 0 not in signs and abs(mean) > 2 * se
    else:
        established = abs(mean) > 2 * se_test
    return Difference(mean, tuple(d), se_seed, se_test, se, established, sign_changes)

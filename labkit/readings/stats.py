"""Every comparison the labs read, with one rule.

A difference a - b of two results measured over k training seeds: per seed d_s = a_s - b_s, the mean d.
Its standard error combines

- the spread over seeds: sd(d_s) / sqrt(k) (what another set of training seeds would move), and
- the test set's: sqrt(pa (1 - pa) / n + pb (1 - pb) / n) for accuracies on n test reviews (unpaired, so
  conservative; every seed is scored on the same reviews, so it does not shrink with k),

as se = sqrt(se_seed^2 + se_test^2). **The rule** (``RULE``): a difference is established when every seed's
difference has the same sign and |d| > 2 se; otherwise the two are level. With one training seed the seed
spread is unknown: a difference is then judged on the test-set error alone, and every verdict says so.

Two independent sets of seeds (two samplers' searches: seed i of one is not seed i of the other) are read by
``unpaired``: the difference of means, the seeds' spread of both sides and the test-set part (``RULE_UNPAIRED``).
Independent replicates that are not seeds of one model (e.g. a search's trials, each its own architecture)
are read by ``replicates``: the mean of per-replicate differences and its standard error sd / sqrt(k),
established beyond 2 SE. A searched best is the best of N candidates, so its lead over its start is biased
upwards; ``labkit.readings`` reads it only after it and its comparator are retrained with fresh seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

RULE = "same sign in every training seed and |difference| > 2 SE (seed and test-set parts), else level"
RULE_UNPAIRED = ("independent searches per side: every seed of one side beyond every seed of the other and "
                 "|difference| > 2 SE (both sides' spread over seeds and the test-set part), else level; one seed "
                 "per side: not established")
RULE_REPLICATES = "|mean difference| > 2 SE over independent trials (sd / sqrt(k)), else level"


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


def verdict(d: Difference) -> str:
    """``higher`` / ``lower`` when ``d`` (a - b) is established, else ``level``."""
    if not d.established:
        return "level"
    return "higher" if d.mean > 0 else "lower"


def replicates(diffs: list[float]) -> Difference:
    """The mean of per-replicate differences ``diffs`` (independent trials, not seeds of one model), its SE
    sd / sqrt(k) (``se_seed``; no separate test-set part: each difference already carries its own test-set
    noise), established when |mean| > 2 SE (``RULE_REPLICATES``)."""
    k = len(diffs)
    if k == 0:
        raise ValueError("replicates: no differences")
    mean = sum(diffs) / k
    se = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (k - 1) / k) if k > 1 else float("nan")
    signs = {(x > 0) - (x < 0) for x in diffs}
    return Difference(mean, tuple(diffs), se, 0.0, se, k > 1 and abs(mean) > 2 * se, len(signs - {0}) > 1)


def unpaired(a: list[float], b: list[float], n: int) -> dict:
    """``mean(a) - mean(b)`` of two independent sets of seeds (two samplers' searches: seed i of one is not
    paired with seed i of the other), judged by ``RULE_UNPAIRED``."""
    def sem(x):
        m = sum(x) / len(x)
        return math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1) / len(x)) if len(x) > 1 else float("nan")

    ma, mb = sum(a) / len(a), sum(b) / len(b)
    d = ma - mb
    se_seed = math.hypot(sem(a), sem(b))
    se_test = math.hypot(accuracy_se(ma, n), accuracy_se(mb, n))
    se = math.hypot(se_seed, se_test)
    apart = min(a) > max(b) or max(a) < min(b)
    seeded = len(a) > 1 and len(b) > 1
    verdict = ("not established" if not seeded else
               ("higher" if d > 0 else "lower") if apart and abs(d) > 2 * se else "level")
    why = ("one seed per side" if not seeded else "beyond 2 SE, every seed apart" if verdict != "level" else
           " and ".join(w for w, on in (("within 2 SE", abs(d) <= 2 * se), ("their seeds overlap", not apart)) if on))
    return {"a": ma, "b": mb, "a_seeds": list(a), "b_seeds": list(b), "difference": d, "se": se,
            "se_seed": se_seed, "se_test": se_test, "seeds": [len(a), len(b)], "verdict": verdict, "why": why}

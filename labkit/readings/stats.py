"""Every comparison the labs read, with one rule.

A difference a - b of two results measured over k training seeds: per seed d_s = a_s - b_s, the mean d.
Its standard error combines

- the spread over seeds: sd(d_s) / sqrt(k) (what another set of training seeds would move), and
- the test set's: sqrt(pa (1 - pa) / n + pb (1 - pb) / n) for accuracies on n test reviews (unpaired, so
  conservative; every seed is scored on the same reviews, so it does not shrink with k),

as se = sqrt(se_seed^2 + se_test^2). **The rule** (``RULE``): a difference is established when every seed's
difference has the same sign and |d| > t se, t the two-sided 95% quantile of Student's t (``t95``: 12.71 for 1
degree of freedom, 4.30 for 2, about 2 from 60) for the SE's effective degrees of freedom (Welch-Satterthwaite,
``effective_df``): the seed part is estimated from k seeds (k - 1 degrees of freedom), the test-set part is a
binomial error known from n (as many as the reviews). Where the seed part dominates, three seeds need 4.30 SE
(2 SE would call a difference at p ~ 0.18); where the test set's error dominates, about 2. Otherwise the two
are level, or, where the difference is below what the test set resolves (|d| <= 2 se_test), "not resolvable
at n reviews". With one training seed the seed spread is unknown: a difference is then judged on the test-set
error alone (2 SE), and every verdict says so.

Two independent sets of seeds (two samplers' searches: seed i of one is not seed i of the other) are read by
``unpaired``: the difference of means, the seeds' spread of both sides and the test-set part (``RULE_UNPAIRED``).
Independent replicates that are not seeds of one model (e.g. a search's trials, each its own architecture)
are read by ``replicates``: the mean of per-replicate differences, its standard error sd / sqrt(k) and, where
every replicate is an accuracy on the same test set, that test set's part (which the replicates' spread cannot
show: they share the reviews), established beyond t for k - 1 degrees of freedom. A searched best is the best of N candidates, so its lead over its start is biased
upwards; ``labkit.readings`` reads it only after it and its comparator are retrained with fresh seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

RULE = ("same sign in every training seed and |difference| > t SE (seed and test-set parts; t: Student's 95% "
        "quantile for the SE's effective degrees of freedom, the seeds' k - 1 and the test set's known error), else level")
RULE_UNPAIRED = ("independent searches per side: every seed of one side beyond every seed of the other and "
                 "|difference| > t SE (Student's t for the SE's effective degrees of freedom; both sides' spread "
                 "over seeds and the test-set part), else level; one seed per side: not established")
RULE_REPLICATES = ("|mean difference| > t SE over independent trials (sd / sqrt(k) and, for accuracies, the shared "
                   "test set's part; Student's t for the SE's effective degrees of freedom), else level")

# the rule as the answers say it
IN_WORDS = ("established only when every seed agrees on its sign and it exceeds t SE (Student's t for the SE's "
            "degrees of freedom: 4.30 where three seeds' spread is the whole SE, about 2 where the test set's error is)")

# Student's t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom; beyond, Cornish-Fisher from z
_T95 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604,
        2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555,
        2.0518, 2.0484, 2.0452, 2.0423)


def t95(df: float) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (1.96 as df grows); a fractional
    ``df`` up to 30 rounds down (the larger quantile)."""
    if not df >= 1:
        raise ValueError(f"t95: degrees of freedom must be >= 1, got {df}")
    if df < len(_T95) + 1:
        return _T95[int(df + 1e-9) - 1]  # 2 degrees of freedom computed as 1.9999999999999998 are 2
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def effective_df(parts: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of an SE sqrt(sum of se_i^2) whose parts ``(se_i, df_i)`` are each
    estimated with df_i degrees of freedom (``math.inf``: a known error, such as a test set's binomial one)."""
    total = sum(se ** 2 for se, _ in parts)
    denominator = sum(se ** 4 / df for se, df in parts if df != math.inf and se > 0)
    return math.inf if denominator == 0 else total ** 2 / denominator


def t_of(parts: list[tuple[float, float]]) -> float:
    df = effective_df(parts)
    return 1.959964 if df == math.inf else t95(max(df, 1.0))


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
    n: int | None = None              # test reviews behind each accuracy (None: not accuracies)
    unit: str = "seeds"               # "trials" for independent replicates (their rule asks no common sign)

    @property
    def seeds(self) -> int:
        return len(self.per_seed)

    @property
    def t(self) -> float:
        """The multiple of the SE a difference must pass: Student's t for the SE's effective degrees of freedom
        (the seeds' spread has seeds - 1, the test set's error is known), 2 for one seed."""
        if self.seeds < 2:
            return 2.0
        return t_of([(self.se_seed, self.seeds - 1), (self.se_test, math.inf)])

    @property
    def unresolvable(self) -> bool:
        """Below what the test set resolves: |d| within 2 test-set SEs, whatever the seeds say."""
        return not self.established and bool(self.n) and self.se_test > 0 and abs(self.mean) <= 2 * self.se_test

    def verdict(self) -> str:
        """``established``, or why not: one seed, the sign changes between seeds, within t SE, or below the test
        set's resolution."""
        if self.seeds < 2:
            return (f"{'beyond' if self.established else 'within'} 2 test-set SE; one training seed, so its spread "
                    "is not measured")
        if self.established:
            return "established"
        if self.unresolvable:
            return f"not resolvable at {self.n:,} test reviews"
        if self.sign_changes and self.unit == "seeds":
            return "not established (the sign changes between seeds)"
        return f"not established (within {self.t:.2f} SE)"

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
        t = t_of([(se_seed, k - 1), (se_test, math.inf)])
        established = not sign_changes and 0 not in signs and abs(mean) > t * se
    else:
        established = abs(mean) > 2 * se_test
    return Difference(mean, tuple(d), se_seed, se_test, se, established, sign_changes, n)


def verdict(d: Difference) -> str:
    """``higher`` / ``lower`` when ``d`` (a - b) is established, else ``level``."""
    if not d.established:
        return "level"
    return "higher" if d.mean > 0 else "lower"


def replicates(diffs: list[float], accuracies: tuple[float, float] | None = None, n: int | None = None) -> Difference:
    """The mean of per-replicate differences ``diffs`` (independent trials, not seeds of one model), its SE: the
    spread sd / sqrt(k) (``se_seed``) and, where each difference is of two accuracies (``accuracies``: their two
    means) on the same ``n`` test reviews, the test set's part, which the trials share so their spread cannot show;
    established when |mean| > t SE, Student's t for the SE's effective degrees of freedom (``RULE_REPLICATES``)."""
    k = len(diffs)
    if k == 0:
        raise ValueError("replicates: no differences")
    mean = sum(diffs) / k
    spread = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (k - 1) / k) if k > 1 else float("nan")
    se_test = math.hypot(accuracy_se(accuracies[0], n), accuracy_se(accuracies[1], n)) if accuracies and n else 0.0
    se = math.hypot(spread, se_test) if k > 1 else float("nan")
    signs = {(x > 0) - (x < 0) for x in diffs}
    established = k > 1 and abs(mean) > t_of([(spread, k - 1), (se_test, math.inf)]) * se
    return Difference(mean, tuple(diffs), spread, se_test, se, established, len(signs - {0}) > 1,
                      n if accuracies else None, "trials")


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
    t = t_of([(sem(a), len(a) - 1), (sem(b), len(b) - 1), (se_test, math.inf)]) if seeded else 2.0
    verdict = ("not established" if not seeded else
               ("higher" if d > 0 else "lower") if apart and abs(d) > t * se else "level")
    why = ("one seed per side" if not seeded else f"beyond {t:.2f} SE, every seed apart" if verdict != "level" else
           " and ".join(w for w, on in ((f"within {t:.2f} SE", abs(d) <= t * se), ("their seeds overlap", not apart))
                        if on))
    return {"a": ma, "b": mb, "a_seeds": list(a), "b_seeds": list(b), "difference": d, "se": se,
            "se_seed": se_seed, "se_test": se_test, "seeds": [len(a), len(b)], "verdict": verdict, "why": why}

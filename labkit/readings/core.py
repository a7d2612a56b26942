"""A reading: one fact a notebook's answers state, computed from its stored numbers before any words.

A ``Reading`` holds the quantities compared, their difference and its standard error where there is one, the
rule applied, the verdict, and ``says``: the sentence the answers state for it (built from the verdict and
the quantities, so a verdict that flips flips the sentence). Each notebook's readings are a pure function of
its stored payloads (``labkit.readings.<notebook>.readings(payloads)``); they are stored in the result JSON
beside ``numbers`` (``store``), ``labkit.answers`` words them, and ``labkit.maintain.claims`` checks them: the stored
readings' results (all but ``says``) equal the recomputed ones, and a reading with ``expect`` has one of the expected verdicts.
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field

from ..results import jsonable
from . import stats

# the verdicts a reading may give: a comparison (a against b), or a check that holds or not
VERDICTS = ("higher", "lower", "level", "holds", "fails", "not established")


@dataclass(frozen=True)
class Reading:
    key: str                      # stable name within its notebook, e.g. "samplers.winner"
    verdict: str                  # one of VERDICTS
    says: str                     # the sentence (or bold phrase) the answers state
    rule: str                     # the rule the verdict applies
    quantities: dict = field(default_factory=dict)  # the numbers it read: a, b, difference, se, seeds, n ...
    source: str = ""              # the result (``<source>.json``) it is stored in
    expect: tuple[str, ...] = ()  # a claim: the verdicts the committed results must give (empty: no claim)
    selection: int = 0            # the candidates it was chosen from (a searched best, a front point); 0: none
    remeasured_by: str = ""       # the reading that measures the selection again on fresh seeds

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"reading {self.key!r}: verdict {self.verdict!r}; allowed values: {', '.join(VERDICTS)}")
        if self.expect and any(v not in VERDICTS for v in self.expect):
            raise ValueError(f"reading {self.key!r}: expect {self.expect}; allowed values: {', '.join(VERDICTS)}")

    @property
    def holds(self) -> bool:
        """A claim holds when its verdict is one it expects (a reading without ``expect`` always holds)."""
        return not self.expect or self.verdict in self.expect

    def stored(self) -> dict:
        """The JSON form (floats rounded-tripped exactly; NaN as None)."""
        return jsonable(dataclasses.asdict(self))


def compare(key: str, a: list[float], b: list[float] | float, n: int | None, *, source: str, says: dict[str, str],
            names: tuple[str, str] = ("a", "b"), expect: tuple[str, ...] = ()) -> Reading:
    """``a - b`` over training seeds by ``stats.difference`` and ``stats.RULE``; ``says[verdict]`` is a format
    string over the quantities (``{a}``, ``{b}``, ``{difference}``, ``{se}``, ``{text}``, ``{seeds}``)."""
    d = stats.difference(list(a), b, n)
    q = quantities(d, a, b, names)
    v = stats.verdict(d)
    return Reading(key, v, says[v].format(**q), stats.RULE, q, source, expect)


def quantities(d: stats.Difference, a, b, names=("a", "b")) -> dict:
    """The numbers a comparison reads: both sides' means and per-seed values, the difference and its SEs."""
    a = list(a)
    b_list = [float(b)] * len(a) if isinstance(b, (int, float)) else list(b)
    q = {"a": sum(a) / len(a), "b": sum(b_list) / len(b_list), "a_name": names[0], "b_name": names[1],
         "a_seeds": a, "b_seeds": b_list, "difference": d.mean, "difference_seeds": list(d.per_seed),
         "se": d.se if d.seeds > 1 else d.se_test, "se_seed": d.se_seed, "se_test": d.se_test, "seeds": d.seeds,
         "sign_changes": d.sign_changes, "t": d.t, "text": d.text()}
    return q


def _bold_head(text: str) -> str:
    """``text`` with its head (up to the first ": " outside parentheses, else all of it) in bold, any bold inside
    it removed."""
    text = text.replace("**", "")
    depth = 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(": ", i):
            return f"**{text[:i]}**{text[i:]}"
    return f"**{text}**"


def selected(reading: Reading, candidates: int, remeasure: Reading | None = None) -> list[Reading]:
    """A reading of a point chosen from ``candidates`` (a searched best, a front point), and its remeasure on
    fresh seeds when there is one. The selection is context only, never bold, never a claim; where it was
    remeasured, the remeasure is the finding (bold; its notebook claims its verdict); where it was not, the
    selection reads "not established (a selection from N on one seed)"."""
    if candidates <= 1:
        return [reading] + ([remeasure] if remeasure else [])
    plain = dataclasses.replace(reading, says=reading.says.replace("**", ""), expect=(), selection=candidates,
                                remeasured_by=remeasure.key if remeasure else "")
    if remeasure is None:
        if plain.verdict != "not established" or "a selection from" not in plain.says:
            plain = dataclasses.replace(plain, verdict="not established",
                                        says=plain.says + f" (not established: a selection from {candidates} on one "
                                                          "seed, not measured again)")
        return [plain]
    return [plain, finding(remeasure)]


def finding(reading: Reading) -> Reading:
    """A remeasured reading as the answers state it: in bold (its own bold part, else its head). Its claim, like every
    claim, is the notebook's ``CLAIMS`` (``compute``): written down, so that numbers that no longer give it fail."""
    says = reading.says if "**" in reading.says else _bold_head(reading.says)
    return dataclasses.replace(reading, says=says)


def check(key: str, holds: bool, says_holds: str, says_fails: str, *, source: str, rule: str,
          quantities: dict | None = None, expect: bool = True) -> Reading:
    """A yes/no fact (e.g. "every dequantization is bit-exact"); ``expect``: a claim that must hold."""
    v = "holds" if holds else "fails"
    return Reading(key, v, says_holds if holds else says_fails, rule, dict(quantities or {}), source,
                   ("holds",) if expect else ())


def of_notebook(notebook: str):
    """The ``readings(payloads)`` function of ``notebook`` (``labkit.readings.<notebook>``), or None when the
    notebook has no readings module."""
    try:
        module = importlib.import_module(f"{__package__}.{notebook}")
    except ModuleNotFoundError as err:
        if err.name != f"{__package__}.{notebook}":
            raise
        return None
    return module.readings


def by_key(found: list[Reading]) -> dict[str, Reading]:
    """Readings by key (the one way the answers look them up)."""
    return {r.key: r for r in found}


def compute(notebook: str, payloads: dict[str, dict | None]) -> list[Reading]:
    """``notebook``'s readings of ``payloads`` (``{result name: stored payload or None}``), each finding its
    notebook claims (``CLAIMS`` of its readings module: key -> the verdicts the full profile's results give) made a
    claim: the verdict is written in the code, not taken from the numbers, so numbers that lose it fail."""
    fn = of_notebook(notebook)
    if fn is None:
        return []
    claims = _claims(notebook, payloads)
    return [dataclasses.replace(r, expect=claims[r.key]) if r.key in claims else r for r in fn(payloads)]


def _claims(notebook: str, payloads: dict[str, dict | None]) -> dict[str, tuple]:
    """``notebook``'s ``CLAIMS`` where ``payloads`` are full-profile results (the claims are of those), else none."""
    if not any((p or {}).get("settings", {}).get("profile") == "full" for p in payloads.values()):
        return {}
    return getattr(importlib.import_module(f"{__package__}.{notebook}"), "CLAIMS", {})


def unread_claims(notebook: str, found: list[Reading], payloads: dict[str, dict | None]) -> dict[str, tuple]:
    """``notebook``'s claims (key -> verdicts) that no reading of its full-profile ``payloads`` gives: a finding
    written down that the numbers no longer state (e.g. a remeasure of another search's best)."""
    read = {r.key for r in found}
    return {k: v for k, v in _claims(notebook, payloads).items() if k not in read}


def by_source(readings: list[Reading]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in readings:
        out.setdefault(r.source, []).append(r.stored())
    return out


def mismatches(readings: list[Reading], payloads: dict[str, dict | None]) -> list[str]:
    """Where the readings stored in ``payloads`` differ from ``readings`` (recomputed): keys missing, extra or
    changed, per result. A change is in a result (verdict, quantities, rule, claim, selection), never in ``says``
    alone: a rewording is a change of words, which the redraw refreshes, not of what the numbers give."""
    out = []
    want = by_source(readings)
    for name, p in payloads.items():
        if p is None:
            continue
        have = {r["key"]: r for r in p.get("readings") or []}
        now = {r["key"]: r for r in want.get(name, [])}
        out += [f"{name}: {k} not stored" for k in now if k not in have]
        out += [f"{name}: {k} stored but no longer read" for k in have if k not in now]
        out += [f"{name}: {k} stored {have[k]['verdict']!r} ({have[k]['says'][:60]}...) differs from its numbers' "
                f"{now[k]['verdict']!r}" for k in now if k in have and _result(have[k]) != _result(now[k])]
    return out


def _result(stored: dict) -> dict:
    """A stored reading less its wording."""
    return {k: v for k, v in stored.items() if k != "says"}


def read(notebook: str, payloads: dict[str, dict | None]) -> dict[str, Reading]:
    """``compute``'s readings of ``notebook`` by key."""
    return by_key(compute(notebook, payloads))

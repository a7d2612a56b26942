"""Lab 1a's readings (``quantization.json``): int8 PTQ against fp32, the narrowest width within 1 point, QAT
against PTQ per width, the equal-training control, QAT against that control, and the narrowest width at chance.
``Seeds`` and ``sides`` are shared with Lab 1b's readings."""
from __future__ import annotations

from . import seeds as _seeds
from . import stats
from .core import Reading, check, compare

# the findings the committed results state, as claims (labkit.readings.core.compute)
CLAIMS = {"narrowest_within_1_point": ('holds',)}

SOURCE = "quantization"
SAYS = {v: "{text}" for v in ("higher", "lower", "level")}  # a difference worded by its numbers alone


class Seeds:
    """Per-seed reads of one stored result: ``k`` seeds, ``n`` test reviews."""

    def __init__(self, numbers: dict):
        self.k, self.n = _seeds.count(numbers), numbers["dataset_sizes"]["test"]

    def of(self, d: dict, key: str) -> list[float]:
        return _seeds.values(d, key, self.k)

    def diff(self, a: dict, ka: str, b: dict, kb: str) -> stats.Difference:
        return stats.difference(self.of(a, ka), self.of(b, kb), self.n)

    def compare(self, key: str, a: dict, ka: str, b: dict, kb: str, source: str, says: dict | None = None,
                names=("a", "b"), expect=()) -> Reading:
        return compare(key, self.of(a, ka), self.of(b, kb), self.n, source=source, says=says or SAYS, names=names,
                       expect=expect)

    def at_chance(self, d: dict, key: str) -> bool:
        """Every seed within two test-set SE of 0.5."""
        return all(stats.at_chance(v, self.n) for v in self.of(d, key))

    def seeds_at_chance(self, d: dict, key: str) -> list[int]:
        """The (0-based) seeds whose ``key`` is within two test-set SE of 0.5."""
        return [i for i, v in enumerate(self.of(d, key)) if stats.at_chance(v, self.n)]


def at_chance(accuracy: float, n: int) -> bool:
    """One accuracy within two test-set SE of 0.5 (``stats.at_chance``: the rule the answers' notes follow)."""
    return stats.at_chance(accuracy, n)


def sides_text(diffs: dict, unit: str) -> str:
    """Where a set of differences is established above and below zero, e.g. per width."""
    up = [k for k, d in diffs.items() if d.established and d.mean > 0]
    down = [k for k, d in diffs.items() if d.established and d.mean < 0]
    if not up and not down:
        return f"not established at any {unit}"
    units = unit[:-1] + "ies" if unit.endswith("y") else unit + "s"
    return f"established above zero at {units} {up or 'none'} and below zero at {down or 'none'}"


def sides(key: str, what: str, diffs: dict, unit: str, *, source: str, positive: bool, expect: bool = False,
          suffix: str = "") -> Reading:
    """A set of differences read together (``what`` is ``sides_text``' subject, e.g. "QAT minus PTQ"): with
    ``positive`` it holds when some is established above zero and none below (the lab's finding, which a claim
    of it then holds to), else when none is established at all."""
    below = [k for k, d in diffs.items() if d.established and d.mean < 0]
    above = [k for k, d in diffs.items() if d.established and d.mean > 0]
    holds = bool(above) and not below if positive else not (above or below)
    text = f"{what} is {sides_text(diffs, unit)}{suffix}"
    return check(key, holds, text, text, source=source,
                 rule=stats.RULE + (f"; holds when some {unit} is established above zero and none below" if positive
                                    else f"; holds when no {unit} is established either way"),
                 quantities={str(k): {"difference": d.mean, "se": d.se, "established": d.established,
                                      "per_seed": list(d.per_seed)} for k, d in diffs.items()},
                 expect=expect)


def read(q: dict) -> list[Reading]:
    sd = Seeds(q)
    fp32, rows = q["fp32"], q["rows"]
    by_w = {r["width"]: r for r in rows}
    out = []
    if 8 in by_w:
        out.append(sd.compare("ptq8_vs_fp32", by_w[8], "ptq", q, "fp32", SOURCE, names=("int8 PTQ", "fp32")))
        if "sheet_rule_int8_frac4_ptq" in q:  # calibrated int8 against the sheet's one frac-4 rule, per seed
            out.append(sd.compare("ptq8_vs_sheet_rule", by_w[8], "ptq", q, "sheet_rule_int8_frac4_ptq", SOURCE,
                                  names=("calibrated int8 PTQ", "the sheet's frac-4 rule")))
        gap = fp32 - by_w[8]["ptq"]
        out.append(check("ptq8_within_1_point", gap <= 0.01,
                         f"int8 PTQ's mean is within 1 point of fp32's ("
                         + (f"{gap:.4f} below)" if gap >= 0 else f"{-gap:.4f} above)"),
                         f"int8 PTQ's mean is **more than 1 point** below fp32's ({gap:+.4f})", source=SOURCE,
                         rule="fp32 - int8 PTQ <= 0.01 (means over seeds)", quantities={"gap": gap}))
    lowest = min((r["width"] for r in rows if r["ptq"] >= fp32 - 0.01), default=None)
    out.append(check("narrowest_within_1_point", lowest is not None,
                     f"the narrowest width whose mean is within 1 point of fp32 is **{lowest} bits**",
                     "no width came within 1 point of fp32", source=SOURCE, rule="PTQ mean >= fp32 - 0.01",
                     quantities={"width": lowest}, expect=False))
    out.append(sides("qat_vs_ptq", "QAT minus PTQ", {r["width"]: sd.diff(r, "qat", r, "ptq") for r in rows},
                     "width", source=SOURCE, positive=True, expect=True))
    ctrl = q.get("control")
    if ctrl is not None:
        out.append(sd.compare("control_vs_fp32", ctrl, "accuracy", q, "fp32", SOURCE,
                              names=("fp32 + training", "fp32")))
        wide = [r for r in rows if r["width"] >= 8]
        if wide:
            vs = {r["width"]: sd.diff(r, "qat", ctrl, "accuracy") for r in wide}
            above = [w for w, d in vs.items() if d.established and d.mean > 0]
            over_base = [r["width"] for r in wide if sd.diff(r, "qat", q, "fp32").established and r["qat"] > fp32]
            out.append(sides("qat_vs_control", "QAT minus the control", vs, "width", source=SOURCE,
                             positive=False,
                             suffix=(": QAT's gain over the untouched fp32 model is the extra training, not "
                                     "quantization" if over_base and not above else "")))
        low = rows[0]
        stuck = sd.at_chance(low, "qat")
        out.append(check("narrowest.qat_at_chance", stuck,
                         f"At {low['width']} bits QAT stays at chance {low['ptq']:.4f} -> {low['qat']:.4f}",
                         f"At {low['width']} bits QAT recovers {low['ptq']:.4f} -> {low['qat']:.4f}", source=SOURCE,
                         rule="every seed within 2 test-set SE of 0.5", expect=False))
        out.append(sd.compare("narrowest.qat_vs_control", low, "qat", ctrl, "accuracy", SOURCE,
                              names=(f"{low['width']}-bit QAT", "control")))
    return out


def readings(payloads: dict) -> list[Reading]:
    p = payloads.get(SOURCE)
    return [] if p is None else read(p["numbers"])


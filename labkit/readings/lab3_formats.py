"""Lab 3 formats' readings (``formats.json``, one SFT model per training seed): each format's PTQ against fp32
and its QAT against its PTQ (``compare`` over seeds), the formats tied at the top before and after QAT, the
formats at chance, which gains most from QAT, whether log and block_log coincide at the study width, and the
claims the committed results hold: QAT established below PTQ for no format, and every >= 8-bit format with a
mantissa within 2 points of fp32 after PTQ."""
from __future__ import annotations

import math

from . import seeds as _seeds
from . import stats
from .core import Reading, check, compare

# the findings the committed results state, as claims (labkit.readings.core.compute): QAT's established gains, and
# every bold finding
CLAIMS = {"qat.log": ('higher',), "qat.block_log": ('higher',), "qat.binary_scaling": ('higher',),
          "qat.binary_residual_sign": ('higher',), "ptq.chance": ('holds',), "qat.most": ('holds',),
          "log_block_log.same": ('holds',)}

SRC = "formats"
CHANCE = 0.5
POWER_OF_TWO = ("log", "block_log")  # no mantissa: values are +-2^e only
NEAR = 0.02  # the near-lossless claim: PTQ within 2 points of fp32


def _acc(d) -> float | None:
    a = (d or {}).get("accuracy")
    return a if isinstance(a, (int, float)) and math.isfinite(a) else None


def _m(v: list[float]) -> float:
    return sum(v) / len(v)


def per_seed(formats: dict[str, dict], stage: str, k: int) -> dict[str, list[float]]:
    """Each format's per-seed accuracies at ``stage`` (``ptq`` or ``qat``), formats with a non-finite one left
    out (a diverged QAT)."""
    out = {}
    for name, r in formats.items():
        if _acc(r.get(stage)) is None:
            continue
        vals = _seeds.values(r[stage], "accuracy", k)
        if all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
            out[name] = vals
    return out


def tied_with_top(acc: dict[str, list[float]], n: int) -> tuple[str, list[str]]:
    """(the highest mean, every format whose difference from it is not established)."""
    top = max(acc, key=lambda k: _m(acc[k]))
    group = [k for k in sorted(acc, key=lambda k: -_m(acc[k]))
             if k == top or not stats.difference(acc[top], acc[k], n).established]
    return top, group


def gain_apart(ptq, qat, ka: str, kb: str, n: int) -> bool:
    """Whether the per-seed QAT gains of formats ``ka`` and ``kb`` differ, established: the seed spread of their
    difference, and the test-set error of the four accuracies."""
    a = [q - p for q, p in zip(qat[ka], ptq[ka])]
    b = [q - p for q, p in zip(qat[kb], ptq[kb])]
    d = stats.difference(a, b, None)
    se_test = math.sqrt(sum(stats.accuracy_se(_m(x[k]), n) ** 2 for x in (ptq, qat) for k in (ka, kb)))
    se = math.hypot(d.se_seed, se_test) if d.seeds > 1 else se_test
    return not d.sign_changes and abs(d.mean) > 2 * se


def readings(payloads: dict) -> list[Reading]:
    f = payloads.get("formats")
    if f is None:
        return []
    num = f["numbers"]
    k, n = _seeds.count(num), num["fp32"]["n"]
    formats = num["formats"]
    ptq, qat = per_seed(formats, "ptq", k), per_seed(formats, "qat", k)
    fp32 = _seeds.values(num["fp32"], "accuracy", k)
    out = []
    for name, v in ptq.items():
        out.append(compare(f"ptq.{name}", v, fp32, n, source=SRC, names=(name, "fp32"),
                           says={x: f"{name} {_m(v):.4f} ({{text}})" for x in ("higher", "lower", "level")}))
    if ptq:
        out.append(top_reading("ptq.top", ptq, n, "The highest PTQ, **{top}** {a:.4f}, is established ahead of "
                               "every other format", "The highest mean PTQ, {top} {a:.4f}, is not told apart from "
                               "{others}: no single best format; the tied group is {group}"))
        out.append(chance(ptq, n))
    both = [x for x in ptq if x in qat]
    gains = {}
    for name in both:
        r = compare(f"qat.{name}", qat[name], ptq[name], n, source=SRC, names=("QAT", "PTQ"),
                    says={x: f"{name} {_m(ptq[name]):.4f} → {_m(qat[name]):.4f} ({{text}})"
                          for x in ("higher", "lower", "level")})
        gains[name] = r
        out.append(r)
    up = sorted((x for x in both if gains[x].verdict == "higher"), key=lambda x: -gains[x].quantities["difference"])
    if len(up) > 1:
        best = up[0]
        tied = [x for x in up[1:] if not gain_apart(ptq, qat, best, x, n)]
        g = {x: gains[x].quantities["difference"] for x in up}
        out.append(check("qat.most", not tied,
                         f"QAT helps most for **{best}** ({g[best]:+.4f}), established ahead of {up[1]} ({g[up[1]]:+.4f})",
                         f"The largest gains, {', '.join(f'{x} {g[x]:+.4f}' for x in [best, *tied])}, are not told "
                         "apart (their difference is not established over seeds)", source=SRC, expect=False,
                         rule="the per-seed gains' difference: same sign in every seed and beyond t SE (seed spread "
                              "and four accuracies' test-set error)", quantities={"best": best, "tied": tied}))
    if qat:
        out.append(top_reading("qat.top", qat, n, "Highest mean after QAT: {top} {a:.4f}, established ahead of the rest",
                               "Highest mean after QAT: {top} {a:.4f}, not told apart from {others}: no single best "
                               "after QAT"))
        over = [x for x in qat if (d := stats.difference(qat[x], fp32, n)).established and d.mean > 0]
        out.append(check("qat.above_fp32", bool(over), f"Established above fp32: {', '.join(over)}",
                         f"None is established above fp32 ({_m(fp32):.4f})", source=SRC, rule=stats.RULE,
                         quantities={"above": over}, expect=False))
    out.append(near_lossless(formats, ptq, fp32))
    lb = log_block_log(formats, payloads.get("weight_snr"), (f.get("settings") or {}).get("format_width", 8), n, k)
    return out + lb


def top_reading(key: str, acc: dict[str, list[float]], n: int, says_single: str, says_tied: str) -> Reading:
    top, group = tied_with_top(acc, n)
    others = ", ".join(f"{x} {_m(acc[x]):.4f}" for x in group if x != top)
    q = {"top": top, "a": _m(acc[top]), "group": group}
    return check(key, len(group) == 1, says_single.format(**q),
                 says_tied.format(top=top, a=q["a"], others=others, group=", ".join(group)), source=SRC, rule=stats.RULE,
                 quantities=q, expect=False)


def chance(ptq: dict[str, list[float]], n: int, near: float = 0.55) -> Reading:
    se = stats.accuracy_se(CHANCE, n)
    at = [x for x in ptq if all(abs(v - CHANCE) <= 2 * se for v in ptq[x])]
    close = [x for x in ptq if x not in at and _m(ptq[x]) <= near]
    says = (f"**At chance after PTQ** (every seed within two test-set standard errors of {CHANCE}, one SE "
            f"{se:.4f}): {', '.join(at) or 'none'}.")
    if close:
        says += (f" Not at chance in every seed but with a mean at or below {near}: "
                 + ", ".join(f"{x} {_m(ptq[x]):.4f} (seeds {'/'.join(f'{v:.4f}' for v in ptq[x])})" for x in close)
                 + ".")
    return check("ptq.chance", bool(at), says, says, source=SRC, expect=False,
                 rule="every seed within 2 test-set SE of 0.5", quantities={"at_chance": at, "near": close})


def near_lossless(formats: dict, ptq: dict[str, list[float]], fp32: list[float]) -> Reading:
    """The claim: every >= 8-bit format with a mantissa keeps PTQ (mean over seeds) within 2 points of fp32 (log
    and block_log, powers of two only, lost 1.7 and 2.7 points at 8 bits on earlier SFT models: not covered)."""
    eight = {x: _m(ptq[x]) for x, r in formats.items()
             if r["bits"]["weight_bits"] >= 8 and x not in POWER_OF_TWO and x in ptq}
    far = [x for x, a in eight.items() if _m(fp32) - a > NEAR]
    return check("ptq.near_lossless", not far,
                 f"every format at >= 8 bits with a mantissa ({', '.join(eight)}) keeps PTQ within "
                 f"{NEAR * 100:g} points of fp32",
                 f"beyond {NEAR * 100:g} points of fp32 after PTQ at >= 8 bits: {', '.join(far)}", source=SRC,
                 rule=f"mean PTQ over seeds >= fp32 - {NEAR}", quantities={"formats": list(eight), "far": far})


def log_block_log(formats: dict, snr: dict | None, width: int, n: int, k: int) -> list[Reading]:
    """log and block_log at ``width``: the same (equal PTQ and loss, equal weight SNR, nothing flushed) or not;
    where the same, whether QAT kept them apart beyond the rule."""
    if "log" not in formats or "block_log" not in formats or snr is None:
        return []
    at = {r["format"]: r for r in snr["numbers"]["rows"] if r["width"] in (width, None)}
    lg, bl = formats["log"], formats["block_log"]
    pl, pb = _acc(lg.get("ptq")), _acc(bl.get("ptq"))
    if pl is None or pb is None or "log" not in at or "block_log" not in at:
        return []
    same = (abs(pl - pb) < 0.5 / n and lg["ptq"].get("loss") == bl["ptq"].get("loss")
            and abs(at["log"]["snr_db"] - at["block_log"]["snr_db"]) < 0.01 and at["log"]["zeroed"] == 0)
    out = [check("log_block_log.same", same, f"**log and block_log are the same at {width} bits**",
                 f"log and block_log differ at {width} bits", source=SRC, expect=False,
                 rule="equal PTQ accuracy and loss, equal weight SNR, no weight flushed",
                 quantities={"ptq": [pl, pb]})]
    ql, qb = _acc(lg.get("qat")), _acc(bl.get("qat"))
    if same and ql is not None and qb is not None and ql != qb:
        a, b = _seeds.values(lg["qat"], "accuracy", k), _seeds.values(bl["qat"], "accuracy", k)
        out.append(compare("log_block_log.qat", a, b, n, source=SRC, names=("log", "block_log"), says={
            "level": f"From these identical starting points QAT ends at {ql:.4f} and {qb:.4f}, {abs(ql - qb):.4f} apart, "
                     "not established ({text})",
            "higher": f"From these identical starting points QAT ends at {ql:.4f} and {qb:.4f}, {abs(ql - qb):.4f} "
                      "apart, established ({text})",
            "lower": f"From these identical starting points QAT ends at {ql:.4f} and {qb:.4f}, {abs(ql - qb):.4f} "
                     "apart, established ({text})"}))
    return out

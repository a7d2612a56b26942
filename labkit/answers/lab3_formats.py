"""Lab 3 part 1's prose (every Linear number format, PTQ and QAT) as Markdown from its numbers:
``figures/lab3/formats.json`` and ``weight_snr.json`` (their ``numbers``, ``settings`` and ``provenance``).

Every comparison of two accuracies cites one test-set standard error, sqrt(p(1-p)/n) with n the stored
test-set size, and calls a difference within two of them a tie: a group is named instead of a single
best. ``render`` builds the whole answers file from the stored JSON alone (``tools/render_answers.py
lab3_formats``); nothing is measured.
"""
from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path

from ..quant.formats.log import LogFormat
from ..report import table
from ..results import load_results, result_dir
from . import measured
from .lab2 import accuracy_se

TITLE = "Lab 3 (part 1): every Linear number format, after PTQ and after QAT"
NAMES = ("formats", "weight_snr")
ANSWERS_FILE = "formats_answers.md"
CHANCE = 0.5  # IMDb is balanced
# Fixes to a format's code after which results measured earlier no longer describe it: format ->
# (commit, its date, what changed). A stored result created before the date is flagged, not hidden.
KNOWN_FIXES = {
    "binary_residual_sign": ("2e53bbf", "2026-11-23T13:28:56+00:00",
                             "each value is now encoded to the nearest level sum; the greedy code before it gave "
                             "values the wrong sign wherever a fitted scale did not exceed the sum of the later ones "
                             "(87% of the pretrained minilm-l2 pooler's inputs on 64 IMDb reviews)"),
}
QAT_COLUMNS = ["format", "bits/weight", "bits/input", "PTQ", "QAT", "QAT - PTQ", "seconds"]


def _acc(d: dict | None) -> float | None:
    """An accuracy as stored (NaN is written as null), None when missing or not finite."""
    a = (d or {}).get("accuracy")
    return a if isinstance(a, (int, float)) and math.isfinite(a) else None


def names_list(names) -> str:
    return ", ".join(names) or "none"


# --- base model and formats ---------------------------------------------------------------------------

def base_text(settings: dict, fp32: dict, sizes: dict, sft: dict, linears: list[str]) -> str:
    """``linears``: the Linear layers quantized (module order when the notebook stored it)."""
    return (f"Base: the SFT model ({settings['model']}, {settings['max_length']} tokens; "
            f"{'from the cache' if 'cached' in sft else 'trained now'}): fp32 accuracy **{fp32['accuracy']:.4f}** on "
            f"{sizes['test']:,} test reviews. It has {len(linears)} Linear layers, "
            + (f"`{linears[-2]}` and `{linears[-1]}` among them; " if len(linears) >= 2 else "")
            + "all of them are quantized below.")


def plan_rows(formats: dict[str, dict]) -> list[dict]:
    """The formats table from stored parameters (when the run did not store its own ``plan``): each format's
    weight parameters as the study set them (others at the format's defaults) and the bits it cost."""
    return [{"format": n, "parameters": f"{n}(" + ", ".join(f"{k}={v}" for k, v in r["params"]["weight"].items()) + ")",
             "roles": ", ".join(r["params"]), "bits/weight": r["bits"]["weight_bits"],
             "bits/input": r["bits"]["data_in_bits"]} for n, r in formats.items()]


def plan_text(plan: list[dict] | None, formats: dict[str, dict] | None = None) -> str:
    if plan is not None:
        return table(plan, ["format", "parameters", "roles", "bits/weight", "bits/input", "value set"], floatfmt=".3f")
    return (table(plan_rows(formats), floatfmt=".3f") + "\n\nParameters the study did not set are at the format's "
            "defaults; each format's value set is in its docstring (`labkit.quant.formats`).")


# --- weight SNR ----------------------------------------------------------------------------------------

def at_width(rows: list[dict], width: int) -> dict[str, dict]:
    """SNR rows at ``width`` (fixed-width formats, stored with width None, included)."""
    return {r["format"]: r for r in rows if r["width"] in (width, None)}


def integer_steps(rows: list[dict]) -> str:
    """Why the integer SNR curve climbs in pairs of widths: under the sheet's rule frac = width // 2 an odd
    width adds an integer bit (range the weights, all below 1, never use) and no fraction bit."""
    snr = {r["width"]: r["snr_db"] for r in rows if r["format"] == "integer"}
    flat = [(w, w + 1) for w in sorted(snr) if w + 1 in snr and w % 2 == 0 and abs(snr[w + 1] - snr[w]) < 0.05]
    if not flat:
        return ""
    return (" The integer curve climbs in pairs (" + ", ".join(f"{a} and {b} bits: {snr[a]:.1f} dB" for a, b in flat)
            + "): under the sheet's rule frac = width // 2 the odd width adds an integer bit, not a fraction bit, "
            "and weights below 1 use no integer bits, so only the even widths refine the grid.")


def snr_text(rows: list[dict], width: int, integer_frac: int | None) -> str:
    at = at_width(rows, width)
    plain = [r for r in at.values() if "fit" not in r["format"]]
    best = max(plain, key=lambda r: r["snr_db"])
    text = (f"At {width} bits the highest weight SNR is **{best['format']}** ({best['snr_db']:.1f} dB at "
            f"{best['bits']:.2f} bits)")
    runner = sorted(plain, key=lambda r: -r["snr_db"])[1] if len(plain) > 1 else None
    if runner is not None:
        text += f", then {runner['format']} ({runner['snr_db']:.1f} dB at {runner['bits']:.2f} bits)"
    text += "."
    if "integer" in at:
        i = at["integer"]
        text += (f" Integer{f' with frac {integer_frac}' if integer_frac is not None else ''} reaches "
                 f"{i['snr_db']:.1f} dB and rounds **{100 * i['zeroed']:.0f}%** of the non-zero weights to 0 (one fixed "
                 "range for all layers)")
        fit = at.get("integer (frac fit per tensor)")
        text += (f"; fitting the frac width per tensor gives {fit['snr_db']:.1f} dB." if fit else ".")
        text += integer_steps(rows)
    if "log" in at:
        text += f" log at its default bias: {at['log']['snr_db']:.1f} dB, {100 * at['log']['zeroed']:.1f}% zeroed."
    return text


def small_width(widths: list[int], width: int) -> int:
    """The small width the log paragraph looks at: 4 where swept (2 bits leave log a single magnitude:
    nothing to fit), else the smallest."""
    return 4 if 4 in widths else min(widths)


def log_small_text(rows: list[dict], width: int) -> str:
    """The default log bias at a width below the study's (empty when there is none)."""
    widths = sorted({r["width"] for r in rows if r["width"] is not None and r["format"] == "log"})
    if not widths:
        return ""
    small = small_width(widths, width)
    at = {r["format"]: r for r in rows if r["width"] == small}
    if small >= width or "log" not in at:
        return ""
    lg, fit = at["log"], at.get("log (bias fit per tensor)")
    fmt = LogFormat(width=small)
    text = (f"At {small} bits the default log bias flushes **{100 * lg['zeroed']:.0f}%** of the weights to zero "
            f"({lg['snr_db']:.1f} dB): its range 2^{fmt.emin}..2^{fmt.emax} cannot hold both weights and activations.")
    if fit:
        text += (f" Fitting the bias to each tensor keeps {100 * (1 - fit['zeroed']):.0f}% non-zero "
                 f"({fit['snr_db']:.1f} dB); the log quantizer module warns when most of a tensor flushes, instead of "
                 "collapsing silently as the reference did.")
    return text


def log_vs_block_log(formats: dict[str, dict], rows: list[dict], width: int, n: int) -> str:
    """Whether log and block_log are the same at ``width`` and apart at a small width, only as far as the
    numbers show it (empty when either is missing)."""
    if "log" not in formats or "block_log" not in formats:
        return ""
    lg, bl = formats["log"], formats["block_log"]
    snr = at_width(rows, width)
    pl, pb = _acc(lg.get("ptq")), _acc(bl.get("ptq"))
    if pl is None or pb is None or "log" not in snr or "block_log" not in snr:
        return ""
    c = measured.compare(pl, pb, n)
    fmt = LogFormat(width=width)
    same_ptq = abs(pl - pb) < 0.5 / n and lg["ptq"].get("loss") == bl["ptq"].get("loss")
    same_snr = abs(snr["log"]["snr_db"] - snr["block_log"]["snr_db"]) < 0.01
    nothing_flushed = snr["log"]["zeroed"] == 0
    if same_ptq and same_snr and nothing_flushed:
        text = (f"**log and block_log are the same at {width} bits**: PTQ {pl:.4f} both (equal loss too), weight SNR "
                f"{snr['log']['snr_db']:.2f} dB both. log's {width - 1} exponent bits span 2^{fmt.emin}..2^{fmt.emax}, "
                "which flushes none of the weights (0.0% zeroed) and, as the equal PTQ shows, holds the activations "
                "too, so block_log's per-block window has nothing to move: a log element has no mantissa, and inside "
                "both windows both give 2^round(log2|x|).")
        ql, qb = _acc(lg.get("qat")), _acc(bl.get("qat"))
        if ql is not None and qb is not None and ql == qb:
            text += f" QAT keeps them equal ({ql:.4f} both)."
        elif ql is not None and qb is not None:
            q = measured.compare(ql, qb, n)
            text += (f" From these identical starting points QAT ends at {ql:.4f} and {qb:.4f}, {abs(q['diff']):.4f} "
                     f"apart ({'within' if q['tie'] else 'beyond'} two standard errors, 2 x {q['se']:.4f}): "
                     + ("how far QAT alone moves equal models here (nondeterministic kernels or the two formats' "
                        "straight-through gradients; this run cannot tell which), so QAT differences of that size "
                        "say nothing about the formats." if q["tie"] else
                        "QAT treats the two formats differently (their straight-through gradients differ)."))
    else:
        text = (f"log and block_log differ at {width} bits: PTQ {pl:.4f} vs {pb:.4f} ({c['diff']:+.4f}, "
                + ("a tie" if c["tie"] else "beyond two standard errors") + f", SE {c['se']:.4f}), weight SNR "
                f"{snr['log']['snr_db']:.2f} vs {snr['block_log']['snr_db']:.2f} dB, log zeroes "
                f"{100 * snr['log']['zeroed']:.1f}% of the weights.")
    widths = sorted({r["width"] for r in rows if r["width"] is not None and r["format"] == "log"})
    small = small_width(widths, width) if widths else None
    lo = {r["format"]: r for r in rows if r["width"] == small}
    if small is not None and small < width and "log" in lo and "block_log" in lo:
        a, b = lo["log"], lo["block_log"]
        if b["snr_db"] - a["snr_db"] > 1:
            text += (f" They come apart where log's fixed window does not fit: at {small} bits log flushes "
                     f"{100 * a['zeroed']:.0f}% of the weights ({a['snr_db']:.1f} dB) while block_log's per-block window "
                     f"keeps {b['snr_db']:.1f} dB ({100 * b['zeroed']:.1f}% zeroed).")
    return text


# --- PTQ and QAT ---------------------------------------------------------------------------------------

def qat_rows(formats: dict[str, dict]) -> list[dict]:
    rows = []
    for n, r in formats.items():
        p, q = _acc(r.get("ptq")), _acc(r.get("qat"))
        rows.append({"format": n, "bits/weight": r["bits"]["weight_bits"], "bits/input": r["bits"]["data_in_bits"],
                     "PTQ": p if p is not None else "-", "QAT": q if q is not None else "-",
                     "QAT - PTQ": q - p if p is not None and q is not None else "-", "seconds": r["seconds"]})
    return rows


def steps_of(formats: dict[str, dict]) -> int:
    return next((r["qat_train"]["steps"] for r in formats.values() if "qat_train" in r), 0)


def qat_text(settings: dict, fp32: dict, sizes: dict, formats: dict[str, dict]) -> str:
    n = fp32["n"]
    failed = {k: r["qat_error"] for k, r in formats.items() if "qat_error" in r}
    return (f"fp32: **{fp32['accuracy']:.4f}**; one test-set standard error there is {accuracy_se(fp32['accuracy'], n):.4f} "
            f"(sqrt(p(1-p)/n), {n:,} reviews). QAT: {steps_of(formats)} steps ({settings['qat_epochs']} epochs of "
            f"{sizes['train']:,} reviews, batch {settings['batch_size']}) at lr {settings['qat_lr']}."
            + (" QAT failed for " + "; ".join(f"{k} ({v})" for k, v in failed.items()) + "." if failed else "")
            + "\n\n" + table(qat_rows(formats), QAT_COLUMNS, floatfmt=".4f"))


def tied_with_top(acc: dict[str, float], n: int) -> tuple[str, list[str], float]:
    """(the highest, every format within two standard errors of it, that SE at the highest's accuracy; the
    tie test of each uses the larger error of the pair)."""
    top = max(acc, key=acc.get)
    group = [k for k in sorted(acc, key=lambda k: -acc[k]) if measured.compare(acc[top], acc[k], n)["tie"]]
    return top, group, accuracy_se(acc[top], n)


def ptq_bullet(ptq: dict[str, float], fp32: float, n: int) -> str:
    if not ptq:
        return "- **PTQ.** No format has a PTQ accuracy stored."
    se = accuracy_se(fp32, n)
    tie = [k for k in ptq if measured.compare(ptq[k], fp32, n)["tie"]]
    below = sorted((k for k in ptq if k not in tie and ptq[k] < fp32), key=lambda k: -ptq[k])
    above = [k for k in ptq if k not in tie and ptq[k] > fp32]
    top, group, top_se = tied_with_top(ptq, n)
    text = (f"- **PTQ.** {len(tie)} of {len(ptq)} formats are tied with fp32 ({fp32:.4f}) right after quantization, "
            f"within two test-set standard errors (one SE {se:.4f}): {names_list(tie)}.")
    if below:
        text += " Below it by more than two: " + ", ".join(f"{k} {ptq[k]:.4f} ({ptq[k] - fp32:+.4f})" for k in below) + "."
    if above:
        text += " Above it by more than two: " + ", ".join(f"{k} {ptq[k]:.4f}" for k in above) + "."
    if len(group) > 1:
        text += (f" The highest PTQ, {top} {ptq[top]:.4f}, is tied within two standard errors (2 x {top_se:.4f}) with "
                 + ", ".join(f"{k} {ptq[k]:.4f}" for k in group if k != top)
                 + f": no single best format; the tied group is {names_list(group)}.")
    else:
        text += (f" The highest PTQ, **{top}** {ptq[top]:.4f}, is ahead of every other format by more than two standard "
                 f"errors (2 x {top_se:.4f}).")
    return text


def chance_bullet(ptq: dict[str, float], n: int, near: float = 0.55) -> str:
    se = accuracy_se(CHANCE, n)
    at = [k for k in ptq if measured.compare(ptq[k], CHANCE, n)["tie"]]
    close = [k for k in ptq if k not in at and ptq[k] <= near]
    text = (f"- **At chance after PTQ** (within two standard errors of {CHANCE}, one SE {se:.4f}): {names_list(at)}.")
    if close:
        text += (f" Above chance by more than that but still at or below {near}: "
                 + ", ".join(f"{k} {ptq[k]:.4f} ({(ptq[k] - CHANCE) / se:.1f} SE)" for k in close) + ".")
    return text


def qat_bullet(ptq: dict[str, float], qat: dict[str, float], fp32: float, n: int, steps: int) -> str:
    both = [k for k in ptq if k in qat]
    gain = {k: qat[k] - ptq[k] for k in both}
    up = [k for k in both if gain[k] > 0 and not measured.compare(qat[k], ptq[k], n)["tie"]]
    down = [k for k in both if gain[k] < 0 and not measured.compare(qat[k], ptq[k], n)["tie"]]
    flat = [k for k in both if k not in up and k not in down]
    text = (f"- **QAT** ({steps} steps) raises accuracy by more than two standard errors of the pair for: "
            + (", ".join(f"{k} {ptq[k]:.4f} → {qat[k]:.4f} ({gain[k]:+.4f})" for k in sorted(up, key=lambda k: -gain[k]))
               or "none") + ".")
    if down:
        text += " It lowers it by more than two for: " + ", ".join(f"{k} ({gain[k]:+.4f})" for k in down) + "."
    if flat:
        text += f" Within two standard errors (no measurable change): {names_list(flat)}."
    if up:
        best = max(up, key=lambda k: gain[k])

        def gain_se(k):  # a gain is a difference of two accuracies: its error adds both
            return math.hypot(accuracy_se(ptq[k], n), accuracy_se(qat[k], n))

        tied = [k for k in up if k != best and gain[best] - gain[k] <= 2 * math.hypot(gain_se(best), gain_se(k))]
        if tied:
            se2 = max(math.hypot(gain_se(best), gain_se(k)) for k in tied)
            text += (f" The largest gains, {', '.join(f'{k} {gain[k]:+.4f}' for k in [best, *tied])}, are tied: they "
                     f"differ by less than two standard errors of a difference of two gains (each gain adds the error "
                     f"of its two accuracies: 2 x {se2:.4f} at most).")
        elif len(up) > 1:
            nxt = max((k for k in up if k != best), key=lambda k: gain[k])
            se2 = math.hypot(gain_se(best), gain_se(nxt))
            text += (f" QAT helps most for **{best}** ({gain[best]:+.4f}), ahead of {nxt} ({gain[nxt]:+.4f}) by more than "
                     f"two standard errors of a difference of two gains (2 x {se2:.4f}).")
    if not qat:
        return text
    top, group, top_se = tied_with_top(qat, n)
    text += (f" Highest after QAT: {top} {qat[top]:.4f}"
             + (f", tied within two standard errors (2 x {top_se:.4f}) with "
                + ", ".join(f"{k} {qat[k]:.4f}" for k in group if k != top) + ": no single best after QAT"
                if len(group) > 1 else
                f", ahead of the rest by more than two standard errors (2 x {top_se:.4f})")
             + ".")
    over = [k for k in qat if qat[k] > fp32 and not measured.compare(qat[k], fp32, n)["tie"]]
    text += (f" Above fp32 by more than two standard errors: {names_list(over)}." if over else
             f" None is above fp32 ({fp32:.4f}) by more than two standard errors.")
    return text


def fixes_text(created: str | None, formats: dict) -> str:
    """Formats whose stored results predate a fix to their code (``KNOWN_FIXES``), from the JSON's date."""
    if not created:
        return ""
    when = _dt.datetime.fromisoformat(created)
    out = []
    for name, (sha, date, what) in KNOWN_FIXES.items():
        if name in formats and when < _dt.datetime.fromisoformat(date):
            r = formats[name]
            shown = {k: "-" if (a := _acc(r.get(k))) is None else f"{a:.4f}" for k in ("ptq", "qat")}
            out.append(f"- **{name} predates its fix.** These numbers were measured on {created[:10]}, before "
                       f"{sha} ({date[:10]}): {what}. Its PTQ {shown['ptq']} and QAT {shown['qat']} are the old "
                       "code's; not rerun since.")
    return "\n".join(out)


def summary(formats: dict[str, dict], fp32: dict, snr_rows: list[dict], width: int, created: str | None) -> str:
    n = fp32["n"]
    ptq = {k: a for k, r in formats.items() if (a := _acc(r.get("ptq"))) is not None}
    qat = {k: a for k, r in formats.items() if (a := _acc(r.get("qat"))) is not None}
    bits = [r["bits"]["weight_bits"] for r in formats.values()]
    parts = [ptq_bullet(ptq, fp32["accuracy"], n), chance_bullet(ptq, n),
             qat_bullet(ptq, qat, fp32["accuracy"], n, steps_of(formats))]
    lb = log_vs_block_log(formats, snr_rows, width, n)
    if lb:
        parts.append("- " + lb)
    fx = fixes_text(created, formats)
    if fx:
        parts.append(fx)
    parts.append(f"- **Cost.** Weights at {min(bits):.2f} to {max(bits):.2f} bits per element; the Lab 3 search trades "
                 "these bits against the accuracies above.")
    return "\n".join(parts)


# --- the whole file -----------------------------------------------------------------------------------

def render(payloads: dict[str, dict | None], how: str | None = None, json_paths: dict[str, str] | None = None) -> str:
    """The answers file from the stored payloads ``formats`` and ``weight_snr`` (a missing one is said so)."""
    paths = {name: (json_paths or {}).get(name, f"figures/lab3/{name}.json") for name in NAMES}
    how = how or measured.STORED.format(module="labkit.answers.lab3_formats", lab="lab3_formats")
    parts = [measured.header(TITLE, {paths[k]: payloads.get(k) for k in NAMES}, how)]
    f, w = payloads.get("formats"), payloads.get("weight_snr")
    s = (f or w or {}).get("settings") or {}
    width = s.get("format_width", 8)
    if f is not None:
        num = f["numbers"]
        linears = num.get("linears") or next(iter(num["formats"].values()))["layers"]
        parts += [base_text(f["settings"], num["fp32"], num["dataset_sizes"], num["sft"], linears),
                  "## The formats and their parameters", plan_text(num.get("plan"), num["formats"])]
    rows = w["numbers"]["rows"] if w is not None else []
    if rows:
        frac = (w["numbers"].get("integer_frac") if w else None)
        if frac is None and f is not None and "integer" in f["numbers"]["formats"]:
            frac = f["numbers"]["formats"]["integer"]["params"]["weight"].get("frac_width")
        parts += ["## Quantization error on the real weights", snr_text(rows, width, frac)]
        small = log_small_text(rows, width)
        if small:
            parts.append(small)
    if f is not None:
        num = f["numbers"]
        parts += ["## PTQ and QAT on IMDb", qat_text(f["settings"], num["fp32"], num["dataset_sizes"], num["formats"]),
                  "## What the numbers say",
                  summary(num["formats"], num["fp32"], rows, width, f["provenance"].get("created"))]
    return "\n\n".join(parts) + "\n"


def render_lab3_formats(profile: str = "full", how: str | None = None) -> tuple[Path, str]:
    """``(answers file, its text)`` from the stored results of ``profile``; measures nothing."""
    folder = result_dir("lab3", profile)
    payloads = {name: load_results("lab3", name, profile) for name in NAMES}
    paths = {name: measured.shown_path(folder / f"{name}.json") for name in NAMES}
    return folder / ANSWERS_FILE, render(payloads, how, paths)

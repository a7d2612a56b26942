"""Lab 3 part 1's prose (every Linear number format, PTQ and QAT) as Markdown from its numbers:
``figures/lab3/formats.json`` and ``weight_snr.json`` (their ``numbers``, ``settings`` and ``provenance``).

Results hold one model per training seed (``labkit.readings.seeds``): every comparison of two accuracies is a
difference over seeds whose uncertainty combines the seed spread with the test-set standard error
(sqrt(p(1-p)/n), n the stored test-set size); a difference that is not established (within 2 SE, or of
another sign in some seed) is a tie, and a group is named instead of a single best. ``render`` builds the
whole answers file from the stored JSON alone (``python -m labkit.redraw lab3_formats --answers``); nothing is
measured.
"""
from __future__ import annotations

from pathlib import Path

from ..readings import seeds as _seeds
from ..readings import read as read_all
from ..readings.stats import IN_WORDS
from ..narrate.lab3_formats import base_text, plan_table, qat_text
from ..readings.tables import log_range, steps_of, stored_accuracy as _acc
from ..report import table
from . import measured

TITLE = "Lab 3 (part 1): every Linear number format, after PTQ and after QAT"
NAMES = ("formats", "weight_snr")

# --- base model and formats ---------------------------------------------------------------------------

def plan_rows(formats: dict[str, dict]) -> list[dict]:
    """The formats table from stored parameters (when the run did not store its own ``plan``): each format's
    weight parameters as the study set them (others at the format's defaults) and the bits it cost."""
    return [{"format": n, "parameters": f"{n}(" + ", ".join(f"{k}={v}" for k, v in r["params"]["weight"].items()) + ")",
             "roles": ", ".join(r["params"]), "bits/weight": r["bits"]["weight_bits"],
             "bits/input": r["bits"]["data_in_bits"]} for n, r in formats.items()]


def plan_text(plan: list[dict] | None, formats: dict[str, dict] | None = None) -> str:
    if plan is not None:
        return plan_table(plan)
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
    emin, emax = log_range(small)
    text = (f"At {small} bits the default log bias flushes **{100 * lg['zeroed']:.0f}%** of the weights to zero "
            f"({lg['snr_db']:.1f} dB): its range 2^{emin}..2^{emax} cannot hold both weights and activations.")
    if fit:
        text += (f" Fitting the bias to each tensor keeps {100 * (1 - fit['zeroed']):.0f}% non-zero "
                 f"({fit['snr_db']:.1f} dB); the log quantizer module warns when most of a tensor flushes, instead of "
                 "collapsing silently as the reference did.")
    return text


def log_vs_block_log(formats: dict[str, dict], rows: list[dict], width: int, read: dict) -> str:
    """Whether log and block_log are the same at ``width`` and apart at a small width (the readings
    ``log_block_log.*``), with the numbers that show it (empty when either is missing)."""
    if "log_block_log.same" not in read:
        return ""
    lg, bl = formats["log"], formats["block_log"]
    snr = at_width(rows, width)
    pl, pb = _acc(lg.get("ptq")), _acc(bl.get("ptq"))
    emin, emax = log_range(width)
    text = read["log_block_log.same"].says
    if read["log_block_log.same"].verdict == "holds":
        text += (f": PTQ {pl:.4f} both (equal loss too), weight SNR "
                 f"{snr['log']['snr_db']:.2f} dB both. log's {width - 1} exponent bits span 2^{emin}..2^{emax}, "
                 "which flushes none of the weights (0.0% zeroed) and, as the equal PTQ shows, holds the activations "
                 "too, so block_log's per-block window has nothing to move: a log element has no mantissa, and inside "
                 "both windows both give 2^round(log2|x|).")
        ql, qb = _acc(lg.get("qat")), _acc(bl.get("qat"))
        if ql is not None and qb is not None and ql == qb:
            text += f" QAT keeps them equal ({ql:.4f} both)."
        elif "log_block_log.qat" in read:
            r = read["log_block_log.qat"]
            text += (" " + r.says + ": " + ("training is deterministic, so what moved them apart is the two formats' "
                                            "straight-through gradients, by less than the rule resolves."
                                            if r.verdict == "level" else
                                            "QAT treats the two formats differently (their straight-through gradients "
                                            "differ)."))
    else:
        text += (f": PTQ {pl:.4f} vs {pb:.4f}, weight SNR {snr['log']['snr_db']:.2f} vs {snr['block_log']['snr_db']:.2f} "
                 f"dB, log zeroes {100 * snr['log']['zeroed']:.1f}% of the weights.")
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


# --- PTQ and QAT: every verdict is a reading (labkit.readings.lab3_formats) ----------------------------------

def _m(v: list[float]) -> float:
    return sum(v) / len(v)


def ptq_bullet(read: dict, fp32: list[float]) -> str:
    rows = [r for key, r in read.items() if key.startswith("ptq.") and key.count(".") == 1
            and key not in ("ptq.top", "ptq.chance", "ptq.near_lossless")]
    if not rows:
        return "- **PTQ.** No format has a PTQ accuracy stored."
    tie = [r for r in rows if r.verdict == "level"]
    below = sorted((r for r in rows if r.verdict == "lower"), key=lambda r: -r.quantities["a"])
    above = [r for r in rows if r.verdict == "higher"]
    text = (f"- **PTQ.** {len(tie)} of {len(rows)} formats are not told apart from fp32 ({_m(fp32):.4f}) right after "
            f"quantization: {', '.join(r.says for r in tie) or 'none'}.")
    if below:
        text += " Established below it: " + ", ".join(r.says for r in below) + "."
    if above:
        text += " Established above it: " + ", ".join(r.says for r in above) + "."
    text += " " + read["ptq.top"].says + "."
    if "ptq.near_lossless" in read:
        text += " Claim: " + read["ptq.near_lossless"].says + "."
    return text


def qat_bullet(read: dict, steps: int) -> str:
    gains = [r for key, r in read.items() if key.startswith("qat.") and key.count(".") == 1
             and key not in ("qat.most", "qat.top", "qat.above_fp32")]
    up = sorted((r for r in gains if r.verdict == "higher"), key=lambda r: -r.quantities["difference"])
    down = [r for r in gains if r.verdict == "lower"]
    flat = [r.says for r in gains if r.verdict == "level"]
    text = f"- **QAT** ({steps} steps) raises accuracy (established) for: " + (", ".join(r.says for r in up) or "none") + "."
    if down:
        text += " It lowers it for: " + ", ".join(r.says for r in down) + "."
    if flat:
        text += " Not established either way: " + ", ".join(flat) + "."
    if "qat.most" in read:
        text += " " + read["qat.most"].says + "."
    if "qat.top" in read:
        text += " " + read["qat.top"].says + ". " + read["qat.above_fp32"].says + "."
    return text


def summary(formats: dict[str, dict], fp32: dict, snr_rows: list[dict], width: int, k: int = 1,
            read: dict | None = None) -> str:
    """``read``: the readings by key (``labkit.readings.lab3_formats``; computed from these numbers if None)."""
    if read is None:
        payloads = {"formats": {"numbers": {"formats": formats, "fp32": fp32, **({"seeds": list(range(k))} if k > 1 else {})},
                                "settings": {"format_width": width}},
                    "weight_snr": {"numbers": {"rows": snr_rows}}}
        read = read_all("lab3_formats", payloads)
    f32 = _seeds.values(fp32, "accuracy", k)
    bits = [r["bits"]["weight_bits"] for r in formats.values()]
    parts = [("- **Seeds.** " + (f"{k} training seeds (an SFT model each; every QAT with the same seed): "
                                 "accuracies are means over seeds, differences are given as mean ± one SE combining "
                                 f"the seed spread with the test-set error, and {IN_WORDS}." if k > 1 else
                                 "One training seed: the seed spread is not measured, so differences are judged on the "
                                 "test-set error alone.")),
             ptq_bullet(read, f32), "- " + read["ptq.chance"].says if "ptq.chance" in read else "",
             qat_bullet(read, steps_of(formats))]
    parts = [p for p in parts if p]
    lb = log_vs_block_log(formats, snr_rows, width, read)
    if lb:
        parts.append("- " + lb)
    parts.append(f"- **Cost.** Weights at {min(bits):.2f} to {max(bits):.2f} bits per element; the Lab 3 search trades "
                 "these bits against the accuracies above.")
    return "\n".join(parts)


# --- the whole file -----------------------------------------------------------------------------------

def render(payloads: dict[str, dict | None], folder: Path | None = None, how: str | None = None) -> str:
    """The answers file from the stored payloads ``formats`` and ``weight_snr`` (a missing one is said so);
    ``folder``: where their JSON lies (its paths shown; default ``figures/lab3/``)."""
    json_paths = {name: measured.shown_path(folder / f"{name}.json") for name in NAMES} if folder else None
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
                  summary(num["formats"], num["fp32"], rows, width, _seeds.count(num),
                          read_all("lab3_formats", payloads))]
    return "\n\n".join(parts) + "\n"

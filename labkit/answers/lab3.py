"""Lab 3's search answers as Markdown from its numbers (unit-tested, so the notebook only calls them)."""
from __future__ import annotations

from ..seeds import accuracy_se

# Why a format family loses accuracy when it does: what its value set cannot hold (see each format's
# docstring in labkit.quant.formats). Cited next to the measured numbers, never instead of them.
WHY = {
    "binary": "one bit keeps only the sign of every input and weight: magnitudes, which attention scores, "
              "LayerNorm inputs and the classifier's margin are made of, are gone",
    "binary_scaling": "one bit plus a scale per row keeps each row's mean magnitude but not the spread inside "
                      "it; the inputs are binarized too, so every token vector becomes a sign pattern",
    "binary_residual_sign": "two residual levels give four magnitudes per tensor, too coarse for activations "
                            "whose values span several orders of magnitude",
    "log": "only powers of two, with a fixed exponent window: a relative error of up to ~41% near the middle "
           "between two powers, and values outside the window clip or vanish",
    "block_log": "powers of two with a per-block window: like log, the mantissa-free rounding error remains",
    "block_fp": "one shared exponent per block: small values next to a large one in the same block lose their "
                "mantissa bits",
    "block_minifloat": "few mantissa bits per element, with a per-block exponent bias",
    "minifloat_denorm": "few mantissa bits and no implicit leading one",
    "minifloat_ieee": "few mantissa bits (an implicit leading one, subnormals near zero)",
    "integer": "a fixed step 2^-frac and range 2^(width-1-frac): small frac widths clip large activations, "
               "large ones round small weights away",
    "mxint8": "8-bit mantissas with a shared exponent per 32 values",
}


def short(layer: str) -> str:
    """``bert.encoder.layer.0.attention.self.query`` -> ``0.attention.self.query``."""
    return layer.replace("bert.encoder.layer.", "").replace("bert.", "")


def integer_answer(best: float, fp32: float, trials: int, uniform_int8: float | None, n_test: int,
                   widths: dict[str, int]) -> str:
    """``widths``: the best trial's width per layer (short names)."""
    se = accuracy_se(fp32, n_test)
    text = (f"The per-layer integer search (TPE, width in {{8, 16, 32}} x frac in {{2, 4, 8}} per Linear layer) "
            f"reached **{best:.4f}** after {trials} trials, against fp32 {fp32:.4f} (one standard error "
            f"{se:.4f} on {n_test:,} reviews)")
    if uniform_int8 is not None:
        text += f" and {uniform_int8:.4f} for int8 with 4 fractional bits in every layer"
    text += ". "
    gap = fp32 - best
    text += ("That is within two standard errors of fp32: per-layer widths and fractions recover the "
             "full-precision accuracy. " if gap < 2 * se else
             f"It stays {gap:.4f} below fp32, more than two standard errors: at these frac widths some layer "
             "always clips or rounds away what it needs. ")
    wide = sorted(layer for layer, w in widths.items() if w > 8)
    text += (f"The best configuration keeps {len(widths) - len(wide)} of {len(widths)} layers at 8 bits"
             + (f"; wider ones: {', '.join(f'`{x}` ({widths[x]})' for x in wide)}." if wide else "."))
    return text


def format_rows(per_format: dict[str, dict], fp32: float) -> list[dict]:
    """``per_format[name] = {"best": accuracy, "bits": average weight bits of that trial, "trials": n}``."""
    rows = [{"format": name, "best accuracy": r["best"], "vs fp32": r["best"] - fp32, "weight bits": r["bits"],
             "trials": r["trials"]} for name, r in per_format.items()]
    return sorted(rows, key=lambda r: -r["best accuracy"])


def formats_answer(rows: list[dict], fp32: float, n_test: int, all_formats: dict) -> str:
    """``rows``: ``format_rows``; ``all_formats``: the all-formats search's best (``best``, ``bits``,
    ``counts``: format -> layers)."""
    se = accuracy_se(fp32, n_test)
    keep = [r for r in rows if r["vs fp32"] >= -2 * se]
    fail = [r for r in rows if r["vs fp32"] < -0.05]
    text = ("Searched one format at a time (every Linear in it, its parameters chosen per layer; integer is "
            "Task 1's search), "
            + (", ".join(f"{r['format']} ({r['best accuracy']:.4f} at {r['weight bits']:.1f} bits)" for r in keep)
               + f" stay within two standard errors ({2 * se:.4f}) of fp32 {fp32:.4f}. " if keep else
               f"no format stays within two standard errors ({2 * se:.4f}) of fp32 {fp32:.4f}. "))
    if fail:
        text += "Those that lose more than 5 points: " + "; ".join(
            f"**{r['format']}** {r['best accuracy']:.4f} at {r['weight bits']:.1f} bits ({WHY[r['format']]})"
            for r in fail) + ". "
    counts = ", ".join(f"{name} x{n}" for name, n in sorted(all_formats["counts"].items(), key=lambda kv: -kv[1]))
    text += (f"Free to mix formats, the all-formats search reached {all_formats['best']:.4f} at "
             f"{all_formats['bits']:.1f} average weight bits with {counts}: with accuracy alone as the objective "
             "nothing rewards fewer bits, so it keeps wide formats wherever they help.")
    return text


def cost_rows(per_lambda: dict[float, dict]) -> list[dict]:
    """``per_lambda[lam] = {"accuracy", "bits", "counts"}`` of each cost search's best trial."""
    return [{"lambda": lam, "accuracy": r["accuracy"], "weight bits": r["bits"],
             "objective": r["accuracy"] - lam * r["bits"],
             "formats": ", ".join(f"{k} x{v}" for k, v in sorted(r["counts"].items(), key=lambda kv: -kv[1]))}
            for lam, r in sorted(per_lambda.items())]


def cost_answer(rows: list[dict]) -> str:
    lo, hi = rows[0], rows[-1]
    if len(rows) == 1:
        return (f"Maximising accuracy - {lo['lambda']:g} x average weight bits picked {lo['accuracy']:.4f} at "
                f"{lo['weight bits']:.1f} bits: one point of the trade-off, fixed by a price per bit chosen in "
                "advance; the multi-objective search below returns the whole trade-off at once.")
    return (f"Maximising accuracy - lambda x average weight bits, the best configuration moves from "
            f"{lo['accuracy']:.4f} at {lo['weight bits']:.1f} bits (lambda {lo['lambda']:g}) to {hi['accuracy']:.4f} "
            f"at {hi['weight bits']:.1f} bits (lambda {hi['lambda']:g}). Each lambda picks one point of the "
            "trade-off, and which one depends on a price per bit chosen in advance; the multi-objective search "
            "below returns the whole trade-off at once.")


def pareto_answer(front: list[dict], uniform: list[dict], qat: list[dict], fp32: float, n_test: int,
                  max_bits: float = 6.0, within: float = 0.01) -> str:
    """``front``/``uniform``/``qat``: rows with ``accuracy`` and ``bits`` (qat rows also ``ptq``); the
    done-when check: a configuration at <= ``max_bits`` within ``within`` of fp32 after QAT."""
    text = (f"The multi-objective search's front holds {len(front)} configurations from "
            f"{front[0]['bits']:.1f} bits ({front[0]['accuracy']:.4f}) to {front[-1]['bits']:.1f} bits "
            f"({front[-1]['accuracy']:.4f}). ")
    dominated = [u for u in uniform if any(f["bits"] <= u["bits"] and f["accuracy"] >= u["accuracy"]
                                           and (f["bits"] < u["bits"] or f["accuracy"] > u["accuracy"]) for f in front)]
    text += (f"{len(dominated)} of the {len(uniform)} uniform-format points (one format in every layer at 8 bits "
             f"or its own width) {'is' if len(dominated) == 1 else 'are'} dominated by a mixed configuration on "
             "the front. ")
    if qat:
        text += "After a short QAT: " + "; ".join(
            f"{q['bits']:.2f} bits {q['ptq']:.4f} -> {q['accuracy']:.4f}" for q in qat) + ". "
        hits = [q for q in qat if q["bits"] <= max_bits and q["accuracy"] >= fp32 - within]
        if hits:
            h = min(hits, key=lambda q: q["bits"])
            text += (f"**A configuration at {h['bits']:.2f} average weight bits reaches {h['accuracy']:.4f} after "
                     f"QAT, within {within * 100:g} point of fp32 {fp32:.4f}.**")
        else:
            low = [q for q in qat if q["bits"] <= max_bits]
            text += (f"**No QAT'd front configuration at <= {max_bits:g} bits comes within {within * 100:g} point of fp32 "
                     f"{fp32:.4f}**" + (f": the best there is {max(q['accuracy'] for q in low):.4f}" if low else
                                        f": the front has no point at <= {max_bits:g} bits that was trained")
                     + f" (one standard error {accuracy_se(fp32, n_test):.4f}).")
    return text

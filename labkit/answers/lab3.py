"""Lab 3's search answers as Markdown from its numbers (unit-tested, so the notebook only calls them)."""
from __future__ import annotations

# the table rows the notebook saves, and layer names, are built in lab3_precision (kept here for the answers)
from ..labs.lab3_precision import cost_rows, format_rows, front_of, short  # noqa: F401
from ..readings.stats import accuracy_se, at_chance

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
    text += ("That is within two standard errors of fp32. " if gap < 2 * se else
             f"It stays {gap:.4f} below fp32, more than two standard errors. ")
    wide = sorted(layer for layer, w in widths.items() if w > 8)
    text += (f"The best configuration keeps {len(widths) - len(wide)} of {len(widths)} layers at 8 bits"
             + (f"; wider ones: {', '.join(f'`{x}` ({widths[x]})' for x in wide)}." if wide else "."))
    return text


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


def against_uniform(best_so_far: dict[str, list[float]], n_test: int) -> str:
    """Each per-format search's best against its own uniform point, the trial queued first (integer's search is
    Task 1's, read against its own baselines there); formats with nothing to choose ran that point alone."""
    gained, level, alone = [], [], []
    for name, curve in best_so_far.items():
        if name in ("integer", "all formats"):
            continue
        if len(curve) == 1:
            alone.append(name)
            continue
        d, se = curve[-1] - curve[0], accuracy_se(curve[0], n_test)
        (gained if d > 2 * se else level).append(f"{name} {d:+.4f} ({d / se:+.1f} SE)")
    text = ("Against each format's own uniform point (its first, queued trial), the search gained beyond two "
            "standard errors for " + ("; ".join(gained) if gained else "none") + ". ")
    if level:
        text += "Level with it: " + "; ".join(level) + ". "
    if alone:
        text += f"With no parameter to choose, {', '.join(alone)} ran that point alone. "
    return text


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


def baseline_text(best: float, trials: list[float], uniform_int8: float | None, n_test: int) -> str:
    """Whether Task 1's search beat the obvious baseline inside its own space (int8, frac 4, every layer), and
    what it means when it did not."""
    if uniform_int8 is None:
        return "The uniform int8 baseline was not measured in this run, so the search cannot be read against it. "
    flat = sum(at_chance(a, n_test) for a in trials)
    if best >= uniform_int8:
        return (f"It beats its obvious baseline, int8 with 4 fractional bits in every layer ({uniform_int8:.4f}), a "
                "point of its own space. ")
    return (f"**The search did not reach its own baseline**: int8 with 4 fractional bits in every layer, a point of "
            f"its space, scores {uniform_int8:.4f}, above the best trial ({best:.4f}); {flat} of {len(trials)} "
            "trials sit at chance. This is an unconverged search (a few dozen TPE trials in a space of 9 choices per "
            "layer, where one layer with too few fractional bits sends the model to chance), not evidence about "
            "frac widths; the baselines were not queued as first trials, and the sheet's option of leaving a layer "
            "in full precision is not in this space. ")


def search_vs_baselines(numbers: dict, uniform_int8: float | None = None) -> dict:
    """Task 1's search read against the baselines inside its space: ``best_baseline`` (label, accuracy) and
    ``best_search`` (the best trial the sampler chose). Results that stored their baselines (queued first
    trials, ``baseline`` set) use them; older ones had none queued, so their baseline is the uniform study's
    int8 frac 4 point (``uniform_int8``) and every trial is the search's. ``None`` where there is no baseline."""
    trials = numbers.get("trials", [])
    if "baselines" in numbers:
        base = [{"label": b["label"], "accuracy": b["accuracy"]} for b in numbers["baselines"]]
        searched = [t["accuracy"] for t in trials if t.get("baseline") is None]
    else:
        base = [] if uniform_int8 is None else [{"label": "int8 frac 4", "accuracy": uniform_int8}]
        searched = [t["accuracy"] for t in trials] or [numbers["best"]]
    if not base:
        return {"best_baseline": None, "best_search": max(searched, default=None)}
    return {"best_baseline": max(base, key=lambda b: b["accuracy"]), "best_search": max(searched, default=None)}


def task1_answer(numbers: dict, fp32: float, n_test: int) -> str:
    """Task 1 from a result that queued its baselines (``lab3.task1_numbers``): the best baseline, the best
    searched trial, whether the search beat the baseline (in test-set standard errors), the trials at chance
    and why, and the best configuration's fp32 layers and average weight bits."""
    base, trials = numbers["baselines"], numbers["trials"]
    searched = [t for t in trials if t.get("baseline") is None]
    read = search_vs_baselines(numbers)
    bb, bs = read["best_baseline"], read["best_search"]
    b_row = next(b for b in base if b["label"] == bb["label"] and b["accuracy"] == bb["accuracy"])
    se = accuracy_se(bb["accuracy"], n_test)
    text = (f"The per-layer integer search (TPE; per Linear layer width in {{8, 16, 32}} x frac in {{2, 4, 8}}, or the "
            f"layer left in fp32) started from {len(base)} baselines queued as its first trials (every layer at one "
            f"width and frac width, and every layer in fp32), then searched {len(searched)} more. Best baseline: "
            f"**{bb['label']} in every layer, {bb['accuracy']:.4f}** at {b_row['bits']:.1f} average weight bits (one "
            f"test-set standard error {se:.4f} on {n_test:,} reviews; fp32 model {fp32:.4f}). ")
    if bs is None:
        text += "No searched trial finished, so the search cannot be read against its baselines. "
    else:
        d = bs - bb["accuracy"]
        top = max(searched, key=lambda t: t["accuracy"])
        text += f"Best searched trial: {bs:.4f} at {top['weight_bits']:.1f} average weight bits. "
        if d >= 2 * se:
            text += f"**The search beat its best baseline** by {d:.4f} ({d / se:.1f} standard errors). "
        elif d > 0:  # above by less than the test set resolves: a tie, not a finding
            text += (f"The search's best is level with its best baseline: {d:+.4f} ({d / se:.1f} standard errors, "
                     "within two, so no gain is established). ")
        elif d == 0:
            text += "The search reached its best baseline but did not exceed it. "
        else:
            text += (f"**The search did not reach its own baseline**: its best searched trial stays {-d:.4f} "
                     f"({-d / se:.1f} standard errors{', within noise' if -d < 2 * se else ''}) below {bb['label']} "
                     "in every layer, a point of its space, so the best configuration it reports is that baseline. "
                     + ("With accuracy alone as the objective nothing rewards fewer bits, so every layer in fp32 is "
                        "this search's trivial optimum, which a mix of integer layers can at best tie. "
                        if bb["label"] == "fp32" else
                        f"{len(searched)} TPE trials in a space of 10 choices per layer did not find a better mix. "))
        ints = [b for b in base if b["label"] != "fp32"]
        if bb["label"] == "fp32" and ints:  # the quantized reading: against the best uniform integer point
            bi = max(ints, key=lambda b: b["accuracy"])
            di = bs - bi["accuracy"]
            text += (f"Against the best uniform integer baseline, {bi['label']} in every layer ({bi['accuracy']:.4f} at "
                     f"{bi['bits']:.1f} bits), the best searched trial is {di:+.4f} ({di / se:+.1f} standard errors). ")
    flat = [t for t in searched if at_chance(t["accuracy"], n_test)]
    flat_base = [b["label"] for b in base if at_chance(b["accuracy"], n_test)]
    if flat or flat_base:
        text += (f"{len(flat)} of {len(searched)} searched trials sit at chance"
                 + (f", as do the baselines {', '.join(flat_base)}" if flat_base else "")
                 + (": the fp32 model is itself at chance here, so chance says nothing about the widths. "
                    if at_chance(fp32, n_test) else
                    ": an integer of width w and frac f holds values up to 2^(w-1-f) in steps of 2^-f, so a layer "
                    "with too few integer bits clips its activations and one with too few fractional bits rounds its "
                    "weights to zero, and one such layer sends the model to chance. "))
    n_fp, widths = len(numbers["fp32_layers"]), numbers["widths"]
    wide = sorted(x for x, w in widths.items() if w > 8)
    which = "a searched trial" if bs is not None and bs > bb["accuracy"] else f"the baseline {bb['label']}"
    text += (f"The best configuration ({which}, {numbers['best']:.4f}) leaves {n_fp} of {numbers['layers']} layers "
             f"in fp32 at {numbers['best_bits']:.2f} average weight bits (an fp32 layer counts 32)")
    if widths:
        text += (f"; of its {len(widths)} integer layers, {len(widths) - len(wide)} are at 8 bits"
                 + (f" and {len(wide)} wider: {', '.join(f'`{x}` ({widths[x]} bits)' for x in wide)}" if wide else ""))
    return text + "."


def lambda_text(rows: list[dict]) -> str:
    """Each lambda's best read under every lambda's objective: a search whose own best loses to another
    search's point under its own objective did not find its optimum."""
    beaten = []
    for r in rows:
        own = r["accuracy"] - r["lambda"] * r["weight bits"]
        better = [o for o in rows if o is not r and o["accuracy"] - r["lambda"] * o["weight bits"] > own + 1e-12]
        if better:
            b = max(better, key=lambda o: o["accuracy"] - r["lambda"] * o["weight bits"])
            beaten.append(f"lambda {r['lambda']:g}'s best ({r['accuracy']:.4f} at {r['weight bits']:.2f} bits) loses "
                          f"under its own objective to lambda {b['lambda']:g}'s ({b['accuracy']:.4f} at "
                          f"{b['weight bits']:.2f} bits)")
    if not beaten:
        return ("Each lambda's best also scores highest under its own objective among the lambdas' bests: within "
                "what was measured, each lambda picks its own point of the trade-off.")
    return ("The lambdas do not each pick their own point: " + "; ".join(beaten) + ". Those searches did not find "
            "the optimum of their own objective within their trials, so the table is a set of unconverged searches, "
            "not a map of the trade-off by price per bit.")


def stored_points(integer: dict | None, formats: dict | None, pareto: dict) -> list[dict]:
    """Every configuration the three stored results name with its PTQ accuracy and bits, labelled by study:
    the multi-objective study's front, the uniform formats, each per-format and the all-formats search's best,
    each cost search's best."""
    pts = [{**p, "from": "multi-objective front"} for p in pareto["front"]]
    pts += [{"accuracy": u["accuracy"], "bits": u["bits"], "from": f"uniform {u['format']}"} for u in pareto["uniform"]]
    pts += [{"accuracy": r["accuracy"], "bits": r["weight bits"], "from": f"cost search lambda {r['lambda']:g}"}
            for r in pareto.get("cost", [])]
    if formats is not None:
        pts += [{"accuracy": r["best accuracy"], "bits": r["weight bits"], "from": f"{r['format']} search"}
                for r in formats["rows"]]
        a = formats["all_formats"]
        pts.append({"accuracy": a["best"], "bits": a["bits"], "from": "all-formats search"})
    return pts


def front_text(pareto: dict, points: list[dict], fp32: float, n_test: int) -> str:
    """The front over every stored point against the multi-objective study's own, and what beats the QAT
    headline without any training."""
    full = front_of(points)
    foreign = [p for p in full if p["from"] != "multi-objective front" and not at_chance(p["accuracy"], n_test)]
    text = ""
    if foreign:
        text += ("Over every configuration the lab's studies stored, the front gains points from the other "
                 "studies: " + "; ".join(f"{p['from']} {p['accuracy']:.4f} at {p['bits']:.2f} bits" for p in foreign)
                 + f", so the multi-objective study alone ({len(pareto['front'])} points) did not find the whole "
                 "trade-off. ")
    beaten: dict[tuple, list[dict]] = {}  # an untrained point -> the QAT'd configurations it is above
    for q in pareto.get("qat") or []:
        ptq_better = [p for p in points if p["bits"] <= q["bits"] + 0.5 and p["accuracy"] > q["accuracy"]]
        if ptq_better:
            b = max(ptq_better, key=lambda p: p["accuracy"])
            beaten.setdefault((b["from"], b["accuracy"], b["bits"]), []).append(q)
    for (source, acc, bits), qs in beaten.items():
        parts = [f"{q['bits']:.2f}-bit ({q['accuracy']:.4f}; "
                 + (f"{bits - q['bits']:+.2f} bits here)" if bits > q["bits"] else "fewer bits here)") for q in qs]
        which = (f"{parts[0].replace('-bit', '-bit configuration', 1)}" if len(parts) == 1
                 else ", ".join(parts[:-1]) + f" and {parts[-1].replace('-bit', '-bit configurations', 1)}")
        text += f"Without any training, {source} reaches {acc:.4f} at {bits:.2f} bits, above the QAT'd {which}. "
    return text


NAMES = ("search_integer", "search_formats", "search_pareto")
ANSWERS_FILE = "search_answers.md"


def render(payloads: dict[str, dict | None]) -> str:
    """``figures/lab3/search_answers.md`` from the stored search results."""
    from .sources import header

    parts = [header("Lab 3 (part 2): mixed-precision search over formats and widths", payloads,
                    "notebooks/lab3_search.ipynb")]
    i_p, f_p, p_p = (payloads.get(n) for n in NAMES)
    if p_p is None:
        return "\n\n".join(parts + ["No stored search results: nothing to render."]) + "\n"
    pareto = p_p["numbers"]
    fp32 = pareto["fp32"]
    trials = (i_p or {}).get("numbers", {}).get("trials", [])
    n_test = next((t["n_test"] for t in trials if "n_test" in t), 25_000)
    uniform_int8 = next((u["accuracy"] for u in pareto["uniform"] if u["format"] == "integer"), None)
    parts.append(f"fp32 of the search's SFT model: {fp32:.4f} on {n_test:,} test reviews (one model: the search "
                 "measures every configuration on the SFT model of the lab's data seed; Lab 3 part 1's numbers are "
                 "means over three training seeds' models, so its accuracy for a configuration differs from this "
                 "one by the model as well as by the evaluation path: the search rounds matmuls in bf16 where a "
                 "format's values are bf16-exact, part 1's reference path in fp32).")
    if i_p is not None:
        num = i_p["numbers"]
        if "baselines" in num:  # the baselines were queued as the study's first trials
            task1 = task1_answer(num, fp32, n_test)
        else:  # none queued: read against the uniform study's int8 point
            task1 = (integer_answer(num["best"], fp32, len(num["best_so_far"]), uniform_int8, n_test, num["widths"])
                     + " " + baseline_text(num["best"], [t["accuracy"] for t in trials], uniform_int8, n_test).strip())
        parts += ["## Task 1: per-layer integer widths", "- **Task 1.** " + task1]
    if f_p is not None:
        num = f_p["numbers"]
        parts += ["## Task 2: one search per format, and all formats together", table_md(num["rows"]),
                  "- **Task 2.** " + formats_answer(num["rows"], fp32, n_test, num["all_formats"])
                  + (" " + against_uniform(num["best_so_far"], n_test).strip() if "best_so_far" in num else "")]
    points = stored_points((i_p or {}).get("numbers"), (f_p or {}).get("numbers"), pareto)
    parts += ["## Cost and the Pareto front", table_md(pareto.get("cost", [])),
              "- **Cost.** " + lambda_text(pareto.get("cost", [])),
              "- **Pareto front.** " + pareto_answer(pareto["front"], pareto["uniform"], pareto.get("qat") or [], fp32,
                                                     n_test) + " " + front_text(pareto, points, fp32, n_test)]
    return "\n\n".join(parts) + "\n"


def table_md(rows: list[dict]) -> str:
    from ..report import table

    return table(rows) if rows else "(no rows stored)"

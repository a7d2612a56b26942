"""Lab 3 search's readings: what each search found against the baselines inside its own space, the front over
every configuration the studies measured, what QAT did to each front point it trained, and the cost searches.

A search's best is the best of N trials on one SFT model and one test set, so its lead over its baseline is
biased upwards: it is read as ``not established`` until ``search_remeasured.json`` (``labkit.labs.lab3_remeasure``)
holds it and its baseline measured again on fresh SFT models (fresh training seeds, paired), where
``readings.compare`` reads the difference over those seeds. A search whose best *is* one of its queued
baselines found nothing to remeasure: that is a yes/no fact (``check``).
"""
from __future__ import annotations

from .core import Reading, check, compare, finding, selected
from .stats import accuracy_se, at_chance

# the findings the committed results state, as claims (labkit.readings.core.compute): every remeasure of a
# selection, and the all-formats search's best being a uniform point
CLAIMS = {"task1.vs_baseline": ('level',), "task1.vs_integer": ('level',),
          "format.block_fp.vs_uniform": ('level',), "format.block_log.vs_uniform": ('level',), "all.found": ('fails',),
          "pareto.headline_remeasured": ('lower',)}

NOT_ESTABLISHED = ("a best of N trials on the search's one SFT model and test set: its lead is biased upwards, so it "
                   "is established only by retraining it and its baseline with fresh seeds")
MAX_BITS, WITHIN = 6.0, 0.01  # the Pareto headline: the fewest bits within 1 point of fp32, at <= 6 bits


def readings(payloads: dict) -> list[Reading]:
    i_p, f_p, p_p, r_p = (payloads.get(n) for n in ("search_integer", "search_formats", "search_pareto",
                                                     "search_remeasured"))
    fp32 = (p_p or f_p or i_p or {}).get("numbers", {}).get("fp32")
    trials = (i_p or {}).get("numbers", {}).get("trials", [])
    n = next((t["n_test"] for t in trials if "n_test" in t), 25_000)
    remeasured = (r_p or {}).get("numbers")
    out = []
    if i_p is not None and "baselines" in i_p["numbers"]:
        out += task1(i_p["numbers"], n, remeasured)
    if f_p is not None:
        out += formats(f_p["numbers"], fp32, n, remeasured, (p_p or {}).get("numbers"))
    if p_p is not None:
        out += pareto(p_p["numbers"], n, remeasured)
    return out


# --- a searched best against its baseline ----------------------------------------------------------------

def best_vs(key: str, role: str, best: tuple[str, float], base: tuple[str, float], n: int, searched: int,
            remeasured: dict | None, source: str) -> Reading:
    """``best``/``base``: (how the answers name it, its accuracy in the search). Read over the fresh seeds of
    ``remeasured["pairs"][role]`` where stored, else ``not established`` (a best of ``searched`` trials: a
    selection, ``Reading.selection``)."""
    pair = (remeasured or {}).get("pairs", {}).get(role)
    if pair is not None:
        seeds = "/".join(str(s) for s in remeasured["seeds"])
        head = (f"Retrained on {len(remeasured['seeds'])} fresh SFT models (training seeds {seeds}; the search used "
                f"seed {remeasured['search_seed']}), {best[0]}")
        says = {"higher": head + f" stays above {base[0]}: {{text}}",
                "lower": head + f" falls below {base[0]}: {{text}}",
                "level": head + f" is level with {base[0]}: {{text}}"}
        return compare(key, pair["best"]["accuracy_seeds"], pair["baseline"]["accuracy_seeds"],
                       remeasured["n_test"], source="search_remeasured", says=says, names=(best[0], base[0]))
    d = best[1] - base[1]
    se = (accuracy_se(best[1], n) ** 2 + accuracy_se(base[1], n) ** 2) ** 0.5
    q = {"a": best[1], "b": base[1], "a_name": best[0], "b_name": base[0], "difference": d, "se": se, "n": n,
         "searched": searched, "seeds": 1}
    return Reading(key, "not established",
                   f"{best[0]} is {d:+.4f} ({d / se:+.1f} SE of the difference) against {base[0]} on the search's "
                   f"SFT model, the best of {searched} searched trials on one training seed: not established "
                   f"(a selection from {searched} on one seed, not retrained with fresh seeds)", NOT_ESTABLISHED, q,
                   source, selection=searched)


def found(key: str, best: float, base: float, says_above: str, says_not: str, source: str, q: dict) -> Reading:
    """Whether a search's best trial lies above its best queued baseline at all (else it reports that baseline)."""
    return check(key, best > base, says_above, says_not, source=source, expect=False,
                 rule="the search's best trial strictly above its best queued baseline (same model, same reviews)",
                 quantities={"best": best, "baseline": base, **q})


# --- Task 1 ------------------------------------------------------------------------------------------------

def task1(num: dict, n: int, remeasured: dict | None) -> list[Reading]:
    base, trials = num["baselines"], num["trials"]
    searched = [t for t in trials if t.get("baseline") is None]
    src = "search_integer"
    out = []
    layers = num["layers"]
    all_int = [t for t in searched if t.get("formats") == {"integer": layers}]
    ints = [b for b in base if b["label"] != "fp32"]
    out.append(check(
        "task1.all_integer", bool(all_int),
        f"{len(all_int)} of Task 1's {len(searched)} searched trials put every layer in integer",
        f"None of Task 1's {len(searched)} searched trials is all-integer (each left at least one layer in fp32), so "
        f"Task 2's integer row is Task 1's {len(ints)} uniform integer baselines alone, not a search",
        source=src, rule="a searched trial with every layer in integer", expect=False,
        quantities={"all_integer": len(all_int), "searched": len(searched), "integer_baselines": len(ints)}))
    if not searched:
        return out
    bb = max(base, key=lambda b: b["accuracy"])
    top = max(searched, key=lambda t: t["accuracy"])
    d, se = top["accuracy"] - bb["accuracy"], accuracy_se(bb["accuracy"], n)
    first = found(
        "task1.found", top["accuracy"], bb["accuracy"],
        f"Its best searched trial ({top['accuracy']:.4f} at {top['weight_bits']:.1f} average weight bits) lies "
        f"{d:+.4f} above its best baseline, {bb['label']} in every layer",
        (f"**The search did not reach its own baseline**: its best searched trial ({top['accuracy']:.4f}) stays "
         f"{-d:.4f} ({-d / se:.1f} test-set SE) below {bb['label']} in every layer" if d < 0 else
         f"**The search did not exceed its own baseline**: its best searched trial ties {bb['label']} in every layer "
         f"at {top['accuracy']:.4f}") + ", a point of its space, so the best configuration it reports is that "
        "baseline", src, {"baseline_label": bb["label"]})
    if d > 0:  # a best of the searched trials above the baseline: a selection, read again on fresh seeds
        again = best_vs("task1.vs_baseline", "integer", ("Task 1's best searched configuration", top["accuracy"]),
                        (f"{bb['label']} in every layer", bb["accuracy"]), n, len(searched), remeasured, src)
        out += selected(first, len(searched), again if again.selection == 0 else None)
    else:
        out.append(first)
    if bb["label"] == "fp32" and ints:  # the quantized reading: against the best uniform integer point too
        bi = max(ints, key=lambda b: b["accuracy"])
        if top["accuracy"] > bi["accuracy"]:
            again = best_vs("task1.vs_integer", "integer:integer", ("Task 1's best searched configuration",
                                                                    top["accuracy"]),
                            (f"{bi['label']} in every layer", bi["accuracy"]), n, len(searched), remeasured, src)
            out.append(again if again.selection else finding(again))
    return out


# --- Task 2 ------------------------------------------------------------------------------------------------

def formats(num: dict, fp32: float | None, n: int, remeasured: dict | None, pareto: dict | None) -> list[Reading]:
    src, out = "search_formats", []
    rows = {r["format"]: r for r in num["rows"]}
    curves = num.get("best_so_far", {})
    if fp32 is not None:
        for name, r in rows.items():  # one SFT model: judged on the test set alone
            vs = compare(f"format.{name}.vs_fp32", [r["best accuracy"]], [fp32], n, source=src, says={
                "level": f"{name} ({r['best accuracy']:.4f} at {r['weight bits']:.1f} bits) is level with fp32",
                "lower": f"{name} ({r['best accuracy']:.4f} at {r['weight bits']:.1f} bits) is below fp32 "
                         "({difference:+.4f}, beyond 2 test-set SE)",
                "higher": f"{name} ({r['best accuracy']:.4f} at {r['weight bits']:.1f} bits) is above fp32 "
                          "({difference:+.4f}, beyond 2 test-set SE)"}, names=(name, "fp32"))
            # a searched format's row is its search's best: a selection from its trials (a format with nothing to
            # choose ran one point); fp32 was not measured again beside it on fresh seeds
            tried = len(curves.get(name) or []) if name != "integer" else 0
            out += selected(vs, tried)
    for name, curve in curves.items():
        if name in ("integer", "all formats") or len(curve) < 2:
            continue
        above = found(f"format.{name}.found", curve[-1], curve[0],
                         f"the {name} search's best ({curve[-1]:.4f}) lies {curve[-1] - curve[0]:+.4f} above its "
                         f"uniform point ({curve[0]:.4f})",
                         f"the {name} search's best is its uniform point ({curve[0]:.4f}): none of its "
                         f"{len(curve) - 1} searched trials beat it", src, {"format": name, "searched": len(curve) - 1})
        if curve[-1] > curve[0]:  # its best above its uniform point: a selection, read again on fresh seeds
            again = best_vs(f"format.{name}.vs_uniform", f"format:{name}", (f"the {name} search's best", curve[-1]),
                            (f"{name}'s uniform point", curve[0]), n, len(curve) - 1, remeasured, src)
            out += selected(above, len(curve) - 1, None if again.selection else again)
            if again.selection:
                out.append(again)
        else:
            out.append(above)
    curve, a = num.get("best_so_far", {}).get("all formats"), num.get("all_formats")
    if curve and a:
        k = len((pareto or {}).get("uniform") or []) or 1  # the uniform points it queued first
        fmt = next(iter(a["counts"])) if len(a["counts"]) == 1 else None
        start = max(curve[:k])
        out.append(found(
            "all.found", curve[-1], start,
            f"Free to mix formats, the all-formats search's best ({a['best']:.4f} at {a['bits']:.1f} average weight "
            f"bits) lies {curve[-1] - start:+.4f} above the best of the {k} uniform points it started from",
            f"**The all-formats search's best ({a['best']:.4f} at {a['bits']:.1f} average weight bits) is a uniform "
            f"baseline**: {fmt or 'one format'} in every layer, one of the {k} uniform points queued as its first "
            f"trials; none of its {len(curve) - k} searched trials beat them", src,
            {"searched": len(curve) - k, "queued": k, "format": fmt}))
        if curve[-1] > start:
            again = best_vs("all.vs_uniform", "all", ("the all-formats search's best", curve[-1]),
                            ("its best uniform point", start), n, len(curve) - k, remeasured, src)
            above = out.pop()
            out += selected(above, len(curve) - k, None if again.selection else again)
            if again.selection:
                out.append(again)
    return out


# --- the Pareto front, QAT and the cost searches ------------------------------------------------------------

def dominated(point: dict, front: list[dict]) -> bool:
    return any(f["bits"] <= point["bits"] and f["accuracy"] >= point["accuracy"]
               and (f["bits"] < point["bits"] or f["accuracy"] > point["accuracy"]) for f in front)


def pareto(num: dict, n: int, remeasured: dict | None = None) -> list[Reading]:
    src, out = "search_pareto", []
    fp32, uniform, qat = num["fp32"], num["uniform"], num.get("qat") or []
    front = num.get("front_all") or num["front"]
    over = "every configuration the studies measured" if num.get("front_all") else "the multi-objective study"
    dom = [u for u in uniform if dominated(u, front)]
    free = [u["format"] for u in uniform if u not in dom]
    out.append(check("pareto.dominated", bool(dom),
                     f"{len(dom)} of the {len(uniform)} uniform-format points are dominated by the front over {over}"
                     + (f" (not dominated: {', '.join(free)})" if free else ""),
                     f"None of the {len(uniform)} uniform-format points is dominated by the front over {over}",
                     source=src, rule="a front point with no more bits and no less accuracy, one of them strictly",
                     quantities={"dominated": [u["format"] for u in dom], "uniform": len(uniform)}, expect=False))
    if num.get("front_all"):
        mo = {(p["accuracy"], p["bits"]) for p in num["front"]}
        extra = [p for p in front if (p["accuracy"], p["bits"]) not in mo]
        out.append(check("pareto.multiobjective_complete", not extra,
                         f"The multi-objective study's own front ({len(num['front'])} points) is the whole front",
                         f"{len(extra)} of the {len(front)} points of the front over {over} come from other studies "
                         f"than the multi-objective one ({len(num['front'])} points of its own): it alone did not "
                         "find the whole trade-off", source=src, rule="every front point is the multi-objective "
                         "study's", quantities={"extra": len(extra), "front": len(front)}, expect=False))
    ptq = [p for p in front if p["bits"] <= MAX_BITS and p["accuracy"] >= fp32 - WITHIN]
    trained = [q for q in qat if q["bits"] <= MAX_BITS and q["accuracy"] >= fp32 - WITHIN]
    def fewest(points):
        return min(points, key=lambda p: p["bits"], default=None)

    # the headline is the untrained point (the one the remeasure retrains); a QAT'd point with fewer bits is
    # context beside it, one QAT run on one seed
    best = fewest(ptq) or fewest(trained)
    if best is None:
        says = (f"**No configuration at <= {MAX_BITS:g} average weight bits comes within {WITHIN * 100:g} point of "
                f"fp32 {fp32:.4f}**, with or without QAT")
    else:
        how = "without any training" if best in ptq else "after QAT"
        says = (f"**On the front over {over}, {best['bits']:.2f} average weight bits reach {best['accuracy']:.4f} "
                f"{how}, within {WITHIN * 100:g} point of fp32 {fp32:.4f}**")
        if best in ptq and trained:
            q = fewest(trained)
            says += (f"; the fewest bits that QAT brought within it are {q['bits']:.2f} ({q['ptq']:.4f} -> "
                     f"{q['accuracy']:.4f}), {abs(q['bits'] - best['bits']):.2f} bits "
                     + ("more" if q["bits"] >= best["bits"] else "fewer (one QAT run on the search's seed, not "
                                                                  "measured again)"))
    headline = check("pareto.headline", best is not None, says, says, source=src,
                     rule=f"the fewest bits at <= {MAX_BITS:g} within {WITHIN} of fp32 without training, else after "
                          "QAT (one SFT model; a front over many configurations measured on one test set also "
                          "selects favourable noise)",
                     quantities={"bits": best and best["bits"], "accuracy": best and best["accuracy"], "fp32": fp32,
                                 "trained": best is not None and best not in ptq})
    pair = (remeasured or {}).get("pairs", {}).get("pareto:headline")
    again = headline_remeasured(pair, remeasured) if pair is not None and best is not None and best in ptq else None
    measured = len(num.get("cloud") or []) or len(front)  # the configurations the front was picked from
    out += selected(headline, measured, again) if best is not None else [headline]
    for q in qat:
        at = f"{q['bits']:.2f}-bit"
        out.append(compare(f"pareto.qat.{q['bits']:.2f}", [q["accuracy"]], [q["ptq"]], n, source=src, says={
            "higher": f"QAT raised the {at} point {q['ptq']:.4f} -> {q['accuracy']:.4f} ({{text}})",
            "lower": f"QAT lowered the {at} point {q['ptq']:.4f} -> {q['accuracy']:.4f} ({{text}})",
            "level": f"QAT left the {at} point level, {q['ptq']:.4f} -> {q['accuracy']:.4f} ({{text}})"},
            names=("after QAT", "before QAT")))
    if num.get("cost"):
        out.append(lambdas(num["cost"], src))
    return out


def headline_remeasured(pair: dict, remeasured: dict) -> Reading:
    """The headline's untrained configuration against fp32 on the fresh seeds' SFT models: the difference by
    the rule, and whether it stays within the headline's 1 point in every seed."""
    a, b = pair["best"]["accuracy_seeds"], pair["baseline"]["accuracy_seeds"]
    below = sum(x - y < -WITHIN for x, y in zip(a, b))
    n = remeasured["n_test"]
    se_test = (accuracy_se(sum(a) / len(a), n) ** 2 + accuracy_se(sum(b) / len(b), n) ** 2) ** 0.5
    coarse = (f" ({WITHIN * 100:g} point is below what {n:,} test reviews resolve: one SE of the difference is "
              f"{se_test * 100:.1f} points)") if 2 * se_test > WITHIN else ""
    head = (f"Retrained on {len(a)} fresh SFT models (training seeds {'/'.join(map(str, remeasured['seeds']))}), "
            f"{pair['best']['label']} "
            + (f"stays within {WITHIN * 100:g} point of fp32 in every seed" if not below else
               f"is more than {WITHIN * 100:g} point below fp32 in {below} of {len(a)} seeds") + coarse + ": ")
    return compare("pareto.headline_remeasured", a, b, remeasured["n_test"], source="search_remeasured",
                   names=(pair["best"]["label"], "fp32"), says={
                       "higher": head + "above fp32, {text}", "lower": head + "below fp32, {text}",
                       "level": head + "against fp32 {text}"})


def lambdas(rows: list[dict], source: str) -> Reading:
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
    return check("cost.own_optimum", not beaten,
                 "Each lambda's best also scores highest under its own objective among the lambdas' bests: within "
                 "what was measured, each lambda picks its own point of the trade-off",
                 "The lambdas do not each pick their own point: " + "; ".join(beaten) + ". Those searches did not "
                 "find the optimum of their own objective within their trials, so the table is a set of unconverged "
                 "searches, not a map of the trade-off by price per bit",
                 source=source, rule="each lambda's best maximises accuracy - lambda x bits among the lambdas' bests",
                 quantities={"beaten": len(beaten), "lambdas": len(rows)}, expect=False)


def chance_count(accuracies: list[float], n: int) -> int:
    """How many accuracies sit at chance (within 2 test-set SE of 0.5): a count the answers quote."""
    return sum(at_chance(a, n) for a in accuracies)



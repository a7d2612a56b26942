"""Lab 3's search answers as Markdown from its numbers (unit-tested, so the notebook only calls them)."""
from __future__ import annotations

from ..quant.formats.base import check_covers, declared, entry
from ..readings import compute
from ..readings.lab3_search import chance_count, lambdas
from ..readings.tables import test_set_se as accuracy_se

# Why a format family loses accuracy when it does: what its value set cannot hold, one sentence each format
# declares beside its class (FormatSpec.why in labkit.quant.formats). Cited next to the measured numbers, never
# instead of them.
WHY: dict[str, str] = check_covers(declared("why"), "labkit.answers.lab3_search.WHY")


def why_of(name: str) -> str:
    """Format ``name``'s sentence (a format the table lacks: an error naming it, never a skipped sentence)."""
    return entry(WHY, name, "labkit.answers.lab3_search.WHY")


def formats_answer(rows: list[dict], fp32: float, n_test: int, all_formats: dict, read: dict) -> str:
    """``rows``: ``format_rows``; ``read``: the readings by key (``labkit.readings.lab3_search``)."""
    se = accuracy_se(fp32, n_test)
    vs = [read[f"format.{r['format']}.vs_fp32"] for r in rows if f"format.{r['format']}.vs_fp32" in read]
    text = ("Searched one format at a time (every Linear in it, its parameters chosen per layer; integer is "
            f"Task 1's search), each format's best against fp32 {fp32:.4f} on the search's SFT model (one seed, so "
            f"judged on the test set's error alone, one SE {se:.4f}; each a best of its search's trials): "
            + "; ".join(r.says for r in vs) + ". ")
    low = [r.quantities["a_name"] for r in vs if r.verdict == "lower"]
    if low:
        text += "What the formats below fp32 cannot hold: " + "; ".join(f"**{k}**: {why_of(k)}" for k in low) + ". "
    if "task1.all_integer" in read:
        text += read["task1.all_integer"].says + ". "
    if "all.found" in read:
        text += read["all.found"].says + (" (with accuracy alone as the objective nothing rewards fewer bits)"
                                          if read["all.found"].verdict == "fails" else "") + ". "
    if "all.vs_uniform" in read:
        text += read["all.vs_uniform"].says + ". "
    return text.strip()


def against_uniform(best_so_far: dict[str, list[float]], read: dict) -> str:
    """Each per-format search's best against its own uniform point, the trial queued first (integer's search is
    Task 1's, read against its own baselines there); formats with nothing to choose ran that point alone."""
    parts, alone = [], []
    for name, curve in best_so_far.items():
        if name in ("integer", "all formats"):
            continue
        if len(curve) == 1:
            alone.append(name)
            continue
        parts.append(read[f"format.{name}.found"].says
                     + (f": {read[f'format.{name}.vs_uniform'].says}" if f"format.{name}.vs_uniform" in read else ""))
    text = ("Against each format's own uniform point (its first, queued trial), " + "; ".join(parts) + ". "
            if parts else "")
    if alone:
        text += f"With no parameter to choose, {', '.join(alone)} ran that point alone. "
    return text


def pareto_answer(pareto: dict, read: dict) -> str:
    """The multi-objective study's front, the front over every study (the line in ``search_pareto.png``), the
    uniform points it dominates, what QAT did to each front point it trained, and the headline."""
    front, every = pareto["front"], pareto.get("front_all") or []
    text = (f"The multi-objective search's own front holds {len(front)} configurations from "
            f"{front[0]['bits']:.1f} bits ({front[0]['accuracy']:.4f}) to {front[-1]['bits']:.1f} bits "
            f"({front[-1]['accuracy']:.4f}). ")
    if every:
        low = [p for p in every if p["bits"] <= 8]
        text += (f"Over every configuration the studies measured ({len(pareto.get('cloud') or [])}; the line drawn in "
                 f"`search_pareto.png`) the front holds {len(every)} points from {every[0]['bits']:.2f} bits "
                 f"({every[0]['accuracy']:.4f}) to {every[-1]['bits']:.2f} bits ({every[-1]['accuracy']:.4f}); "
                 + (f"the {len(low)} at 8 bits or fewer: " if len(low) < len(every) else "")
                 + ", ".join(f"{p['accuracy']:.4f} at {p['bits']:.2f}" for p in low) + ". ")
    if "pareto.multiobjective_complete" in read:
        text += read["pareto.multiobjective_complete"].says + ". "
    text += "Uniform points (one format in every layer at 8 bits or its own width): " + read["pareto.dominated"].says + ". "
    qat = [r for k, r in read.items() if k.startswith("pareto.qat.")]
    if qat:
        text += (f"A short QAT of {len(qat)} front configurations (each measured once, on the search's SFT model; "
                 "its before-QAT accuracy is measured in the QAT path, fp32 matmuls): " + "; ".join(r.says for r in qat)
                 + ". ")
    head = read["pareto.headline"]
    if "pareto.headline_remeasured" in read:  # the finding is the remeasure; the front point is context
        text += (read["pareto.headline_remeasured"].says + ". That configuration is the front's fewest-bits point "
                 f"within 1 point of fp32 on the search's SFT model, a selection from {head.selection} configurations "
                 f"on one seed and one test set; there: {head.says}. ")
    else:
        text += head.says + ". "
    return text.strip()


def task1_answer(numbers: dict, fp32: float, n_test: int, read: dict) -> str:
    """Task 1 from a result that queued its baselines (``lab3.task1_numbers``): the best baseline, what the search
    found against it (``read``: the readings by key), the trials at chance and why, and the best configuration's
    fp32 layers and average weight bits."""
    base, trials = numbers["baselines"], numbers["trials"]
    searched = [t for t in trials if t.get("baseline") is None]
    bb = max(base, key=lambda b: b["accuracy"])
    se = accuracy_se(bb["accuracy"], n_test)
    text = (f"The per-layer integer search (TPE; per Linear layer width in {{8, 16, 32}} x frac in {{2, 4, 8}}, or the "
            f"layer left in fp32) started from {len(base)} baselines queued as its first trials (every layer at one "
            f"width and frac width, and every layer in fp32), then searched {len(searched)} more. Best baseline: "
            f"**{bb['label']} in every layer, {bb['accuracy']:.4f}** at {bb['bits']:.1f} average weight bits (one "
            f"test-set standard error {se:.4f} on {n_test:,} reviews; fp32 model {fp32:.4f}). ")
    if "task1.found" not in read:
        text += "No searched trial finished, so the search cannot be read against its baselines. "
    else:
        text += read["task1.found"].says + ". "
        for key in ("task1.vs_baseline", "task1.vs_integer"):
            if key in read:
                text += read[key].says + ". "
    flat = chance_count([t["accuracy"] for t in searched], n_test)
    flat_base = [b["label"] for b in base if chance_count([b["accuracy"]], n_test)]
    if flat or flat_base:
        text += (f"{flat} of {len(searched)} searched trials sit at chance"
                 + (f", as do the baselines {', '.join(flat_base)}" if flat_base else "")
                 + (": the fp32 model is itself at chance here, so chance says nothing about the widths. "
                    if chance_count([fp32], n_test) else
                    ": an integer of width w and frac f holds values up to 2^(w-1-f) in steps of 2^-f, so a layer "
                    "with too few integer bits clips its activations and one with too few fractional bits rounds its "
                    "weights to zero, and one such layer sends the model to chance. "))
    n_fp, widths = len(numbers["fp32_layers"]), numbers["widths"]
    wide = sorted(x for x, w in widths.items() if w > 8)
    which = ("a searched trial" if read.get("task1.found") and read["task1.found"].verdict == "holds"
             else f"the baseline {bb['label']}")
    text += (f"The best configuration ({which}, {numbers['best']:.4f}) leaves {n_fp} of {numbers['layers']} layers "
             f"in fp32 at {numbers['best_bits']:.2f} average weight bits (an fp32 layer counts 32)")
    if widths:
        text += (f"; of its {len(widths)} integer layers, {len(widths) - len(wide)} are at 8 bits"
                 + (f" and {len(wide)} wider: {', '.join(f'`{x}` ({widths[x]} bits)' for x in wide)}" if wide else ""))
    return text + "."


def lambda_text(rows: list[dict]) -> str:
    """Each lambda's best read under every lambda's objective (the reading ``cost.own_optimum``)."""
    return lambdas(rows, "search_pareto").says + "."


def remeasured_text(remeasured: dict | None) -> str:
    """How the searched bests were measured again (or that they were not)."""
    if remeasured is None:
        return ("`search_remeasured.json` is not stored: every searched best's lead over its baseline is the best of "
                "N trials on the search's one SFT model, read as not established (`python -m "
                "labkit.labs.lab3_remeasure` measures each best and its baseline again on fresh training seeds).")
    num = remeasured["numbers"]
    return (f"Each searched best that lies above its baseline, and the Pareto headline's configuration, were measured "
            f"again with the search's own PTQ objective on {len(num['seeds'])} fresh SFT models (training seeds "
            f"{'/'.join(map(str, num['seeds']))}; the search's was {num['search_seed']}), paired per seed: a training "
            f"seed here is {num['training_seed']}. {len(num['pairs'])} pairs, {num['seconds']:.0f} s.")


NAMES = ("search_integer", "search_formats", "search_pareto", "search_remeasured")


def render(payloads: dict[str, dict | None], folder=None) -> str:
    """``figures/lab3/search_answers.md`` from the stored search results: every verdict is a reading
    (``labkit.readings.lab3_search``) of them, pasted as it says."""
    from .sources import header

    parts = [header("Lab 3 (part 2): mixed-precision search over formats and widths", payloads,
                    "notebooks/lab3_search.ipynb")]
    i_p, f_p, p_p, r_p = (payloads.get(n) for n in NAMES)
    if p_p is None:
        return "\n\n".join(parts + ["No stored search results: nothing to render."]) + "\n"
    read = {r.key: r for r in compute("lab3_search", payloads)}
    pareto = p_p["numbers"]
    fp32 = pareto["fp32"]
    trials = (i_p or {}).get("numbers", {}).get("trials", [])
    n_test = next((t["n_test"] for t in trials if "n_test" in t), 25_000)
    parts.append(f"fp32 of the search's SFT model: {fp32:.4f} on {n_test:,} test reviews (one model: the search "
                 "measures every configuration on the SFT model of the lab's data seed; Lab 3 part 1's numbers are "
                 "means over three training seeds' models, so its accuracy for a configuration differs from this "
                 "one by the model as well as by the evaluation path: the search rounds matmuls in bf16 where a "
                 "format's values are bf16-exact, part 1's reference path in fp32).")
    parts.append("- **Searched bests.** " + remeasured_text(r_p))
    if i_p is not None:
        num = i_p["numbers"]
        task1 = (task1_answer(num, fp32, n_test, read) if "baselines" in num else
                 "This result stored no baselines queued as the search's first trials, so its best cannot be read "
                 f"against them (best {num['best']:.4f}); rerun the notebook to queue them.")
        parts += ["## Task 1: per-layer integer widths", "- **Task 1.** " + task1]
    if f_p is not None:
        num = f_p["numbers"]
        parts += ["## Task 2: one search per format, and all formats together", table_md(num["rows"]),
                  "- **Task 2.** " + formats_answer(num["rows"], fp32, n_test, num["all_formats"], read)
                  + (" " + against_uniform(num["best_so_far"], read).strip() if "best_so_far" in num else "")]
    parts += ["## Cost and the Pareto front", table_md(pareto.get("cost", []))]
    if "cost.own_optimum" in read:
        parts.append("- **Cost.** " + read["cost.own_optimum"].says + ".")
    parts.append("- **Pareto front.** " + pareto_answer(pareto, read))
    return "\n\n".join(parts) + "\n"


def table_md(rows: list[dict]) -> str:
    from ..report import table

    return table(rows) if rows else "(no rows stored)"



"""Lab 1's answers as Markdown from its numbers (the figure JSON's ``numbers``), unit-tested.

Every comparison of two accuracies cites one test-set standard error; QAT and fine-tuned pruning are
compared with the fp32 model trained for the same extra epochs (``control``), not only with the
untouched base, since extra training alone can raise accuracy.
"""
from __future__ import annotations

from .lab2 import accuracy_se as se

BASE_NOTE = ("The sheet starts Lab 1 from Lab 0's LoRA model; labkit starts from the SFT model (every weight "
             "fine-tuned, no adapter to merge first), so absolute numbers are not the sheet's.")


def chance_note(acc: float, share: float | None, n: int) -> str:
    """Why an accuracy sits at chance: one class predicted for (almost) every review."""
    if share is None or abs(acc - 0.5) > 2 * se(0.5, n):
        return ""
    if share <= 0.01 or share >= 0.99:
        return (f"predicts {'positive' if share >= 0.99 else 'negative'} for {max(share, 1 - share):.1%} of reviews: "
                "the logits no longer depend on the input, so accuracy is the class balance, 0.500")
    return f"is at chance with {share:.1%} positive predictions (guessing, not a constant answer)"


def _compare(a: float, b: float, n: int) -> str:
    d, e = a - b, se(b, n)
    return f"{d:+.4f} ({'within' if abs(d) <= 2 * e else 'beyond'} 2 SE = {2 * e:.4f})"


def quantization(q: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1a from ``quantization.json`` numbers."""
    fp32, n, rows = q["fp32"], q["dataset_sizes"]["test"], q["rows"]
    by_w = {r["width"]: r for r in rows}
    ctrl = q.get("control")
    lowest_ok = min((r["width"] for r in rows if r["ptq"] >= fp32 - 0.01), default=None)
    out = [f"**Base.** {BASE_NOTE} fp32 SFT model: {fp32:.4f} on {n:,} test reviews (one SE {se(fp32, n):.4f})."]
    text = "**PTQ.** "
    if 8 in by_w:
        text += (f"int8 PTQ scores {by_w[8]['ptq']:.4f}, {_compare(by_w[8]['ptq'], fp32, n)} from fp32 (the sheet's "
                 f"single frac-4 rule: {q['sheet_rule_int8_frac4_ptq']:.4f}); ")
    text += (f"the narrowest width within 1 point of fp32 is **{lowest_ok} bits**. " if lowest_ok else
             "no width came within 1 point of fp32. ")
    low = rows[0]
    text += f"At {low['width']} bits PTQ gives {low['ptq']:.4f}"
    note = chance_note(low["ptq"], low.get("ptq_positive_share"), n)
    text += f": the model {note}." if note else "."
    out.append(text)
    text = f"**QAT** ({settings['qat_epochs']:g} epoch at lr {settings['finetune_lr']:g}). "
    below = [r["width"] for r in rows if r["qat"] < r["ptq"] - se(r["ptq"], n)]
    text += ("QAT is at or above PTQ (within one SE) at every width. " if not below else
             f"QAT is below PTQ by more than one SE at widths {below}. ")
    if ctrl is None:
        text += ("No equal-training fp32 control was measured in this run, so QAT above fp32 cannot be told "
                 "apart from the effect of training longer.")
    else:
        c = ctrl["accuracy"]
        wide = [r for r in rows if r["width"] >= 8]
        beat = [r["width"] for r in wide if r["qat"] - c > 2 * se(c, n)]
        text += (f"The same {ctrl['epochs']:g} epoch of training without quantization takes fp32 from {fp32:.4f} "
                 f"to **{c:.4f}** ({_compare(c, fp32, n)}): that is the baseline QAT must be read against. ")
        if wide:
            spread = max(abs(r["qat"] - c) for r in wide)
            above_base = [r["width"] for r in wide if r["qat"] - fp32 > 2 * se(fp32, n)]
            text += (f"From 8 bits up QAT lands within {spread:.4f} of that control"
                     + (f" and beyond 2 SE above it only at widths {beat}" if beat else
                        ", never beyond 2 SE above it" + (
                            ": QAT's gain over the untouched fp32 model is the extra training, not quantization"
                            if above_base else "")) + ". ")
        text += (f"At {low['width']} bits QAT recovers {low['ptq']:.4f} -> {low['qat']:.4f}, "
                 f"{_compare(low['qat'], c, n)} from the control.")
    out.append(text)
    wide16 = [r for r in rows if r["width"] >= 16]
    if wide16:
        out.append(f"**Wide formats.** From 16 bits up PTQ stays within "
                   f"{max(abs(r['ptq'] - fp32) for r in wide16):.4f} of fp32: the rounding error is far below the "
                   "weights' own spread.")
    return out


def pruning(p: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1b from ``pruning.json`` numbers."""
    fp32, n, rows = p["fp32"], p["dataset_sizes"]["test"], p["rows"]
    local = [r for r in rows if r.get("scope", settings["prune_scope"]) == settings["prune_scope"]]
    get = {(r["method"], r["sparsity"]): r for r in local}
    sps = sorted({r["sparsity"] for r in local})
    err = max(abs(r["achieved_weight_sparsity"] - r["sparsity"]) for r in rows)
    out = [f"**Base.** {BASE_NOTE} Unpruned: {fp32:.4f} (one SE {se(fp32, n):.4f}). Achieved weight sparsity is "
           f"within {100 * err:.3f} points of the request everywhere (exact counts per layer)."]
    above = [s for s in sps if any(abs(get[(m, s)][k] - 0.5) > 2 * se(0.5, n)
                                   for m in ("random", "l1-norm") if (m, s) in get for k in ("pruned", "finetuned"))]
    l1_ok = [s for s in above if ("l1-norm", s) in get and ("random", s) in get
             and get[("l1-norm", s)]["finetuned"] >= get[("random", s)]["finetuned"] - se(fp32, n)]
    text = (f"**Random vs L1.** Where either is above chance ({len(above)} of {len(sps)} sparsities), L1 is at or "
            f"above random after fine-tuning (within one SE) at {len(l1_ok)}: removing the smallest weights and "
            "activations disturbs the function least, while a random mask removes large values as often as small. ")
    flat = [s for s in sps if ("random", s) in get and abs(get[("random", s)]["pruned"] - 0.5) <= 2 * se(0.5, n)]
    if flat:
        r = get[("random", flat[0])]
        note = chance_note(r["pruned"], r.get("pruned_positive_share"), n)
        text += (f"Random pruning sits at {r['pruned']:.4f} from sparsity {flat[0]:g} up"
                 + (f": the model {note}" if note else "") + ". ")
    out.append(text)
    worse = [s for s in sps if ("l1-norm", s) in get
             and get[("l1-norm", s)]["finetuned"] < get[("l1-norm", s)]["pruned"] - 2 * se(0.5, n)]
    if worse:
        r = get[("l1-norm", worse[0])]
        note = chance_note(r["finetuned"], r.get("finetuned_positive_share"), n)
        text = (f"**Fine-tuning can hurt.** L1 at {worse[0]:g} falls from {r['pruned']:.4f} to {r['finetuned']:.4f} "
                "with fine-tuning")
        if r.get("finetuned_positive_share") is None:
            text += (". This run did not record the share of each predicted class, so whether the model collapsed "
                     "to one answer is not shown.")
        elif "predicts" in note:
            text += (f": after it the model {note}. With {worse[0]:.0%} of weights and activations masked, "
                     f"{settings['prune_epochs']:g} epoch at lr {settings['finetune_lr']:g} settled on a constant "
                     "answer (a cheap minimum of the loss on balanced data) instead of rebuilding the features.")
        else:
            text += f": after it the model {note}." if note else "."
        out.append(text)
    ctrl = p.get("control")
    if ctrl is None:
        out.append("**Equal training.** No unpruned model trained for the same epochs was measured in this run, so "
                   "fine-tuned points above the base cannot be told apart from the effect of training longer.")
    else:
        best = max((r for r in local if r["method"] == "l1-norm"), key=lambda r: r["finetuned"], default=None)
        out.append(f"**Equal training.** The unpruned model trained the same {ctrl['epochs']:g} epoch reaches "
                   f"{ctrl['accuracy']:.4f} ({_compare(ctrl['accuracy'], fp32, n)} from the base)"
                   + (f"; the best fine-tuned L1 point ({best['sparsity']:g}) is {_compare(best['finetuned'], ctrl['accuracy'], n)} "
                      "from it" if best else "") + ".")
    glob = {r["sparsity"]: r for r in rows if r.get("scope") == "global" and r["method"] == "l1-norm"}
    if glob:
        pairs = [(s, get[("l1-norm", s)], g) for s, g in sorted(glob.items()) if ("l1-norm", s) in get]
        out.append("**Global vs local scope (L1).** " + "; ".join(
            f"at {s:g}: local {lo['pruned']:.4f} / {lo['finetuned']:.4f}, global {g['pruned']:.4f} / "
            f"{g['finetuned']:.4f} (pruned / fine-tuned)" for s, lo, g in pairs)
            + ". One global threshold lets layers with small weights lose more than their share and layers with "
            "large weights less" + (": " + _scope_verdict(pairs, n) if pairs else "."))
    return out


def _scope_verdict(pairs, n) -> str:
    better = [s for s, lo, g in pairs if g["pruned"] - lo["pruned"] > 2 * se(lo["pruned"], n)]
    worse = [s for s, lo, g in pairs if lo["pruned"] - g["pruned"] > 2 * se(lo["pruned"], n)]
    if not better and not worse:
        return "right after pruning the two agree within 2 SE at every sparsity measured."
    return (f"right after pruning global is better beyond 2 SE at {better or 'no sparsity'} and worse at "
            f"{worse or 'no sparsity'}.")


QUANTIZE_NAMES, PRUNE_NAMES = ("quantization",), ("pruning",)


def render_quantize(payloads: dict) -> str:
    """``quantize_answers.md`` from the stored ``quantization`` result (``results.load_results``)."""
    from .sources import header

    p = payloads["quantization"]
    return (header("Lab 1a: fixed-point quantization, PTQ and QAT", payloads, "notebooks/lab1_quantize.ipynb")
            + "\n\n" + "\n".join("- " + b for b in quantization(p["numbers"], p["settings"])) + "\n")


def render_prune(payloads: dict) -> str:
    """``prune_answers.md`` from the stored ``pruning`` result."""
    from .sources import header

    p = payloads["pruning"]
    return (header("Lab 1b: pruning, random vs L1-norm, weights and activations", payloads,
                   "notebooks/lab1_prune.ipynb")
            + "\n\n" + "\n".join("- " + b for b in pruning(p["numbers"], p["settings"])) + "\n")

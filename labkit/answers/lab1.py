"""Lab 1's answers as Markdown from its numbers (the figure JSON's ``numbers``), unit-tested.

Results hold one model per training seed (``labkit.seeds``): every comparison of two accuracies is a
difference over seeds whose uncertainty combines the seed spread with the test-set standard error, and it
is called established only when every seed agrees on its sign and it exceeds two of those errors. QAT and
fine-tuned pruning are compared with the fp32 model trained for the same extra epochs (``control``), not
only with the untouched base, since extra training alone can raise accuracy.
"""
from __future__ import annotations

from .. import seeds as _seeds
from ..readings import stats as _stats
from ..readings.stats import accuracy_se as se

BASE_NOTE = ("The sheet starts Lab 1 from Lab 0's LoRA model; labkit starts from the SFT model (every weight "
             "fine-tuned, no adapter to merge first), so absolute numbers are not the sheet's.")
PRUNE_BASE_NOTE = ("The sheet prunes the best model of its Task 1 (the quantization sweep); labkit prunes the fp32 "
                   "SFT model, so pruning is measured on its own, not on top of quantization (Lab 2's "
                   "compression-aware search combines the two).")


def chance_note(acc: float, share, n: int) -> str:
    """Why an accuracy sits at chance: one class predicted for (almost) every review. ``share``: the share of
    positive predictions, or one per training seed."""
    shares = [share] if share is None or isinstance(share, (int, float)) else list(share)
    if None in shares or not _stats.at_chance(acc, n):
        return ""
    constant = [x <= 0.01 or x >= 0.99 for x in shares]
    if all(constant):
        if len(shares) > 1:
            pos = sum(x >= 0.99 for x in shares)
            return (f"predicts one class for every review in each of its {len(shares)} seeds (positive in {pos}, "
                    "negative in the others): the logits no longer depend on the input, so accuracy is the class "
                    "balance, 0.500")
        return (f"predicts {'positive' if shares[0] >= 0.99 else 'negative'} for {max(shares[0], 1 - shares[0]):.1%} "
                "of reviews: the logits no longer depend on the input, so accuracy is the class balance, 0.500")
    if len(shares) > 1:
        return (f"is at chance with {'/'.join(f'{x:.1%}' for x in shares)} positive predictions over its seeds"
                + (" (a constant answer in some seeds, not all)" if any(constant) else " (guessing)"))
    return f"is at chance with {shares[0]:.1%} positive predictions (guessing, not a constant answer)"


class _Seeds:
    """Per-seed reads of one stored result: ``k`` seeds, ``n`` test reviews."""

    def __init__(self, numbers: dict):
        self.k, self.n = _seeds.count(numbers), numbers["dataset_sizes"]["test"]

    def of(self, d: dict, key: str) -> list[float]:
        return _seeds.values(d, key, self.k)

    def diff(self, a: dict, ka: str, b: dict, kb: str) -> _stats.Difference:
        return _stats.difference(self.of(a, ka), self.of(b, kb), self.n)

    def shares(self, d: dict, key: str):
        """Per-seed positive-prediction shares of ``key`` (None where the run did not record them)."""
        return None if d.get(key) is None else self.of(d, key)

    def at_chance(self, d: dict, key: str) -> bool:
        """Every seed within two test-set SE of 0.5."""
        return all(abs(v - 0.5) <= 2 * se(0.5, self.n) for v in self.of(d, key))

    def spread(self, d: dict, key: str) -> str:
        vals = self.of(d, key)
        return f"{d[key]:.4f}" + (f" (seeds {'/'.join(f'{v:.4f}' for v in vals)})" if self.k > 1 else "")

    def intro(self, profile: str | None) -> str:
        if self.k > 1:
            return (f"{self.k} training seeds (one SFT model each, and every later training with the same seed); "
                    "numbers are means over seeds, and each difference is given as mean ± one SE combining the seed "
                    "spread with the test-set error, established only when every seed agrees on its sign and it "
                    "exceeds 2 SE.")
        why = " (the quick profile trains one to stay within its time budget)" if profile == "quick" else ""
        return (f"One training seed{why}: the seed spread is not measured, so differences below are judged on the "
                "test-set error alone (± shows it) and what another seed would change is unknown.")


def sides(diffs: dict, unit: str) -> str:
    """Where a set of differences is established above and below zero, e.g. per width."""
    up = [k for k, d in diffs.items() if d.established and d.mean > 0]
    down = [k for k, d in diffs.items() if d.established and d.mean < 0]
    if not up and not down:
        return f"not established at any {unit}"
    units = unit[:-1] + "ies" if unit.endswith("y") else unit + "s"
    return f"established above zero at {units} {up or 'none'} and below zero at {down or 'none'}"


def _widths(rows, test) -> list:
    return [r["width"] for r in rows if test(r)]


def quantization(q: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1a from ``quantization.json`` numbers."""
    sd = _Seeds(q)
    fp32, n, rows = q["fp32"], sd.n, q["rows"]
    by_w = {r["width"]: r for r in rows}
    ctrl = q.get("control")
    lowest_ok = min((r["width"] for r in rows if r["ptq"] >= fp32 - 0.01), default=None)
    out = [f"**Base.** {BASE_NOTE} fp32 SFT model: {sd.spread(q, 'fp32')} on {n:,} test reviews (one test-set SE "
           f"{se(fp32, n):.4f}). {sd.intro(settings.get('profile'))}"]
    text = "**PTQ.** "
    if 8 in by_w:
        text += (f"int8 PTQ scores {by_w[8]['ptq']:.4f}, {sd.diff(by_w[8], 'ptq', q, 'fp32').text()} from fp32 (the "
                 f"sheet's single frac-4 rule: {q['sheet_rule_int8_frac4_ptq']:.4f}); ")
    text += (f"the narrowest width whose mean is within 1 point of fp32 is **{lowest_ok} bits**. " if lowest_ok else
             "no width came within 1 point of fp32. ")
    low = rows[0]
    text += f"At {low['width']} bits PTQ gives {low['ptq']:.4f}"
    note = chance_note(low["ptq"], sd.shares(low, "ptq_positive_share"), n)
    text += f": the model {note}." if note else "."
    out.append(text)
    text = f"**QAT** ({settings['qat_epochs']:g} epoch at lr {settings['finetune_lr']:g}). "
    text += f"QAT minus PTQ is {sides({r['width']: sd.diff(r, 'qat', r, 'ptq') for r in rows}, 'width')}. "
    if ctrl is None:
        text += ("No equal-training fp32 control was measured in this run, so QAT above fp32 cannot be told "
                 "apart from the effect of training longer.")
    else:
        c = ctrl["accuracy"]
        text += (f"The same {ctrl['epochs']:g} epoch of training without quantization takes fp32 from {fp32:.4f} "
                 f"to **{c:.4f}** ({sd.diff(ctrl, 'accuracy', q, 'fp32').text()}): that is the baseline QAT must "
                 "be read against. ")
        wide = [r for r in rows if r["width"] >= 8]
        if wide:
            vs = {r["width"]: sd.diff(r, "qat", ctrl, "accuracy") for r in wide}
            above = [w for w, d in vs.items() if d.established and d.mean > 0]
            over_base = [r["width"] for r in wide if sd.diff(r, "qat", q, "fp32").established
                         and r["qat"] > fp32]
            text += (f"From 8 bits up QAT lands within {max(abs(d.mean) for d in vs.values()):.4f} of that control; "
                     f"QAT minus the control is {sides(vs, 'width')}"
                     + (": QAT's gain over the untouched fp32 model is the extra training, not quantization"
                        if over_base and not above else "") + ". ")
        stuck = sd.at_chance(low, "qat")
        text += (f"At {low['width']} bits QAT {'stays at chance' if stuck else 'recovers'} {low['ptq']:.4f} -> "
                 f"{low['qat']:.4f}, {sd.diff(low, 'qat', ctrl, 'accuracy').text()} from the control.")
    out.append(text)
    wide16 = [r for r in rows if r["width"] >= 16]
    if wide16:
        out.append(f"**Wide formats.** From 16 bits up mean PTQ stays within "
                   f"{max(abs(r['ptq'] - fp32) for r in wide16):.4f} of fp32: the rounding error is far below the "
                   "weights' own spread.")
    return out


def pruning(p: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1b from ``pruning.json`` numbers."""
    sd = _Seeds(p)
    fp32, n, rows = p["fp32"], sd.n, p["rows"]
    local = [r for r in rows if r.get("scope", settings["prune_scope"]) == settings["prune_scope"]]
    get = {(r["method"], r["sparsity"]): r for r in local}
    sps = sorted({r["sparsity"] for r in local})
    err = max(abs(r["achieved_weight_sparsity"] - r["sparsity"]) for r in rows)
    epochs, lr = settings["prune_epochs"], settings["finetune_lr"]
    out = [f"**Base.** {PRUNE_BASE_NOTE} Unpruned: {sd.spread(p, 'fp32')} (one test-set SE {se(fp32, n):.4f}). "
           f"{sd.intro(settings.get('profile'))} "
           + (f"Achieved weight sparsity matches the request at every point (largest gap {100 * err:.1g} points: "
              "whole weights per layer)." if err < 5e-4 else
              f"Achieved weight sparsity is within {100 * err:.2f} points of the request everywhere.")]
    pairs = [(s, get[("l1-norm", s)], get[("random", s)]) for s in sps
             if ("l1-norm", s) in get and ("random", s) in get]
    parts = []
    for stage, label in (("pruned", "right after pruning"), ("finetuned", f"after {epochs:g} epoch of fine-tuning")):
        d = {s: sd.diff(l1, stage, rnd, stage) for s, l1, rnd in pairs}
        chance = [s for s, l1, rnd in pairs if sd.at_chance(l1, stage) and sd.at_chance(rnd, stage)]
        parts.append(f"{label}, L1 minus random is {sides(d, 'sparsity')}"
                     + (f" (both at chance at {chance})" if chance else ""))
    text = ("**Random vs L1.** " + "; ".join(parts) + ". Removing the smallest weights and activations disturbs the "
            "function least, while a random mask removes large values as often as small. ")
    for stage, label in (("pruned", "before fine-tuning"), ("finetuned", "after fine-tuning")):
        flat = [s for s in sps if ("random", s) in get and sd.at_chance(get[("random", s)], stage)]
        if flat:
            r = get[("random", flat[0])]
            note = chance_note(r[stage], sd.shares(r, f"{stage}_positive_share"), n)
            text += (f"Random pruning {label} is at chance at sparsities {flat}"
                     + (f" (at {flat[0]:g} the model {note})" if note else "") + ". ")
        else:
            text += f"Random pruning {label} stays above chance at every sparsity. "
    out.append(text)
    stuck = [s for s in sps if ("random", s) in get and sd.at_chance(get[("random", s)], "finetuned")]
    if stuck:
        r = get[("random", stuck[0])]
        def always_one_class(key):  # every seed answers one class for (almost) every review
            got = sd.shares(r, key)
            return got is not None and all(not 0.01 < x < 0.99 for x in got)

        constant = always_one_class("finetuned_positive_share")
        out.append(f"**Why fine-tuning does not recover random pruning from {stuck[0]:g} up.** A random mask zeroes "
                   f"{stuck[0]:.0%} of every Linear's weights and of its input features regardless of their size, in "
                   "every layer at once, the classifier's input included; " + (
                       "right after pruning the model already answers one class for every review, and " if
                       always_one_class("pruned_positive_share") else "")
                   + f"{epochs:g} epoch at lr {lr:g} (the masks stay in place) ends "
                   + ("at a constant answer, a cheap minimum of the loss on balanced data" if constant else
                      "at chance") + ". Whether longer or faster training would rebuild the features was not "
                   "measured here (the sheet fine-tunes 5 epochs).")
    worse = [s for s in sps if ("l1-norm", s) in get
             and sd.diff(get[("l1-norm", s)], "finetuned", get[("l1-norm", s)], "pruned").established
             and get[("l1-norm", s)]["finetuned"] < get[("l1-norm", s)]["pruned"]]
    if worse:
        r = get[("l1-norm", worse[0])]
        note = chance_note(r["finetuned"], sd.shares(r, "finetuned_positive_share"), n)
        text = (f"**Fine-tuning can hurt.** L1 at {worse[0]:g} falls from {r['pruned']:.4f} to {r['finetuned']:.4f} "
                "with fine-tuning (established over seeds)")
        if r.get("finetuned_positive_share") is None:
            text += (". This run did not record the share of each predicted class, so whether the model collapsed "
                     "to one answer is not shown.")
        elif "predicts" in note:
            text += (f": after it the model {note}. With {worse[0]:.0%} of weights and activations masked, "
                     f"{epochs:g} epoch at lr {lr:g} settled on a constant answer (a cheap minimum of the loss on "
                     "balanced data) instead of rebuilding the features.")
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
                   f"{ctrl['accuracy']:.4f} ({sd.diff(ctrl, 'accuracy', p, 'fp32').text()} from the base)"
                   + (f"; the best fine-tuned L1 point ({best['sparsity']:g}, {best['finetuned']:.4f}) is "
                      f"{sd.diff(best, 'finetuned', ctrl, 'accuracy').text()} from it" if best else "") + ".")
    glob = {r["sparsity"]: r for r in rows if r.get("scope") == "global" and r["method"] == "l1-norm"}
    if glob:
        gp = [(s, get[("l1-norm", s)], g) for s, g in sorted(glob.items()) if ("l1-norm", s) in get]
        out.append("**Global vs local scope (L1).** " + "; ".join(
            f"at {s:g}: local {lo['pruned']:.4f} / {lo['finetuned']:.4f}, global {g['pruned']:.4f} / "
            f"{g['finetuned']:.4f}" for s, lo, g in gp)
            + " (pruned / fine-tuned, means). One global threshold lets layers with small weights lose more than "
            "their share and layers with large weights less" + (": " + _scope_verdict(gp, sd) if gp else "."))
    return out


def _scope_verdict(pairs, sd: _Seeds) -> str:
    said = []
    for stage, label in (("pruned", "right after pruning"), ("finetuned", "after fine-tuning")):
        d = {s: sd.diff(g, stage, lo, stage) for s, lo, g in pairs}
        said.append(f"{label}, global minus local is {sides(d, 'sparsity')}")
    return "; ".join(said) + "."


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

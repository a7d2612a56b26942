"""Lab 1's answers as Markdown from its numbers (the figure JSON's ``numbers``), unit-tested.

Results hold one model per training seed (``labkit.readings.seeds``): every comparison of two accuracies is a
difference over seeds whose uncertainty combines the seed spread with the test-set standard error, and it
is called established only when every seed agrees on its sign and it exceeds two of those errors. QAT and
fine-tuned pruning are compared with the fp32 model trained for the same extra epochs (``control``), not
only with the untouched base, since extra training alone can raise accuracy.
"""
from __future__ import annotations

from ..readings import lab1_prune as _p
from ..readings import lab1_quantize as _q
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


class _Seeds(_q.Seeds):
    """Per-seed reads of one stored result (``readings.lab1_quantize.Seeds``), with the prediction shares."""

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


def quantization(q: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1a from ``quantization.json`` numbers, wording ``labkit.readings.lab1_quantize``."""
    sd = _Seeds(q)
    r = _q.by_key(_q.read(q))
    fp32, n, rows = q["fp32"], sd.n, q["rows"]
    by_w = {row["width"]: row for row in rows}
    ctrl = q.get("control")
    out = [f"**Base.** {BASE_NOTE} fp32 SFT model: {sd.spread(q, 'fp32')} on {n:,} test reviews (one test-set SE "
           f"{se(fp32, n):.4f}). {sd.intro(settings.get('profile'))}"]
    text = "**PTQ.** "
    if 8 in by_w:
        text += (f"int8 PTQ scores {by_w[8]['ptq']:.4f}, {r['ptq8_vs_fp32'].says} from fp32 (the sheet's single "
                 f"frac-4 rule: {q['sheet_rule_int8_frac4_ptq']:.4f}): {r['ptq8_within_1_point'].says}; ")
    text += r["narrowest_within_1_point"].says + ". "
    low = rows[0]
    text += f"At {low['width']} bits PTQ gives {low['ptq']:.4f}"
    note = chance_note(low["ptq"], sd.shares(low, "ptq_positive_share"), n)
    text += f": the model {note}." if note else "."
    out.append(text)
    text = f"**QAT** ({settings['qat_epochs']:g} epoch at lr {settings['finetune_lr']:g}). "
    text += r["qat_vs_ptq"].says + ". "
    if ctrl is None:
        text += ("No equal-training fp32 control was measured in this run, so QAT above fp32 cannot be told "
                 "apart from the effect of training longer.")
    else:
        text += (f"The same {ctrl['epochs']:g} epoch of training without quantization takes fp32 from {fp32:.4f} "
                 f"to **{ctrl['accuracy']:.4f}** ({r['control_vs_fp32'].says}): that is the baseline QAT must "
                 "be read against. ")
        wide = [row for row in rows if row["width"] >= 8]
        if wide:
            gap = max(abs(d["difference"]) for d in r["qat_vs_control"].quantities.values())
            text += f"From 8 bits up QAT lands within {gap:.4f} of that control; {r['qat_vs_control'].says}. "
        text += f"{r['narrowest.qat_at_chance'].says}, {r['narrowest.qat_vs_control'].says} from the control."
    out.append(text)
    wide16 = [row for row in rows if row["width"] >= 16]
    if wide16:
        out.append(f"**Wide formats.** From 16 bits up mean PTQ stays within "
                   f"{max(abs(row['ptq'] - fp32) for row in wide16):.4f} of fp32: the rounding error is far below the "
                   "weights' own spread.")
    return out


def pruning(p: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1b from ``pruning.json`` numbers, wording ``labkit.readings.lab1_prune``."""
    sd = _Seeds(p)
    r = _p.by_key(_p.read(p, settings))
    fp32, n, rows = p["fp32"], sd.n, p["rows"]
    get = _p.local_rows(p, settings["prune_scope"])
    sps = sorted({s for _, s in get})
    epochs, lr = settings["prune_epochs"], settings["finetune_lr"]
    out = [f"**Base.** {PRUNE_BASE_NOTE} Unpruned: {sd.spread(p, 'fp32')} (one test-set SE {se(fp32, n):.4f}). "
           f"{sd.intro(settings.get('profile'))} {r['achieved_sparsity'].says}."]
    text = (f"**Random vs L1.** {r['l1_vs_random.pruned'].says}; {r['l1_vs_random.finetuned'].says}. Removing the "
            "smallest weights and activations disturbs the function least, while a random mask removes large values "
            "as often as small. ")
    for stage in ("pruned", "finetuned"):
        reading = r[f"random_at_chance.{stage}"]
        text += reading.says
        if reading.verdict == "holds":
            first = reading.quantities["sparsities"][0]
            row = get[("random", first)]
            note = chance_note(row[stage], sd.shares(row, f"{stage}_positive_share"), n)
            text += f" (at {first:g} the model {note})" if note else ""
        text += ". "
    out.append(text.rstrip())
    out += _random_recovery(r, get, sps, epochs, lr, sd)
    worse = r["l1.finetuning_lowers"]
    if worse.verdict == "holds":
        row = get[("l1-norm", worse.quantities["sparsities"][0])]
        note = chance_note(row["finetuned"], sd.shares(row, "finetuned_positive_share"), n)
        text = f"**Fine-tuning can hurt.** {worse.says}"
        if row.get("finetuned_positive_share") is None:
            text += (". This run did not record the share of each predicted class, so whether the model collapsed "
                     "to one answer is not shown.")
        elif "predicts" in note:
            text += (f": after it the model {note}. With {row['sparsity']:.0%} of weights and activations masked, "
                     f"{epochs:g} epoch at lr {lr:g} settled on a constant answer (a cheap minimum of the loss on "
                     "balanced data) instead of rebuilding the features.")
        else:
            text += f": after it the model {note}." if note else "."
        out.append(text)
    also = f"; {worse.says}" if worse.verdict != "holds" else ""
    ctrl = p.get("control")
    if ctrl is None:
        out.append("**Equal training.** No unpruned model trained for the same epochs was measured in this run, so "
                   f"fine-tuned points above the base cannot be told apart from the effect of training longer{also}.")
    else:
        best = r.get("best_l1_vs_control")
        out.append(f"**Equal training.** The unpruned model trained the same {ctrl['epochs']:g} epoch reaches "
                   f"{ctrl['accuracy']:.4f} ({r['control_vs_fp32'].says} from the base)"
                   + (f"; the best fine-tuned L1 point ({best.quantities['a_name'].split()[1]}, "
                      f"{best.quantities['a']:.4f}) is {best.says} from it" if best else "") + also + ".")
    glob = {row["sparsity"]: row for row in rows if row.get("scope") == "global" and row["method"] == "l1-norm"}
    gp = [(s, get[("l1-norm", s)], g) for s, g in sorted(glob.items()) if ("l1-norm", s) in get]
    if gp:
        out.append("**Global vs local scope (L1).** " + "; ".join(
            f"at {s:g}: local {lo['pruned']:.4f} / {lo['finetuned']:.4f}, global {g['pruned']:.4f} / "
            f"{g['finetuned']:.4f}" for s, lo, g in gp)
            + " (pruned / fine-tuned, means). One global threshold lets layers with small weights lose more than "
            f"their share and layers with large weights less: {r['global_vs_local.pruned'].says}; "
            f"{r['global_vs_local.finetuned'].says}.")
    return out


def _random_recovery(r: dict, get: dict, sps: list, epochs: float, lr: float, sd: _Seeds) -> list[str]:
    """What fine-tuning recovers of random pruning, sparsity by sparsity: back above chance or not, and how far
    from fp32 and from L1. The mechanism a random mask offers (weights and features removed regardless of their
    size) holds at every sparsity, so it is offered as the reason only where no sparsity recovers."""
    rec = [r[f"random_recovery.s{s:g}"] for s in sps if f"random_recovery.s{s:g}" in r]
    at = {x.key: float(x.key.split(".s")[1]) for x in rec}
    back = [at[x.key] for x in rec if x.verdict == "holds"]
    stuck = [at[x.key] for x in rec if x.verdict == "fails"]
    out = []
    if rec:
        head = ("**What fine-tuning recovers of random pruning.** " if back else
                f"**Why fine-tuning does not recover random pruning from {stuck[0]:g} up.** ")
        text = (head + f"Random masks leave the model at chance right after pruning at sparsities "
                f"{list(at.values())}; after {epochs:g} epoch of fine-tuning at lr {lr:g} (the masks stay in place), "
                + "; ".join(x.says for x in rec) + ". ")
        mechanism = ("A random mask zeroes that share of every Linear's weights and of its input features regardless "
                     "of their size, in every layer at once, the classifier's input included")
        if back and stuck:
            lo, hi = max(back), min(stuck)
            text += (f"{mechanism}: that is as true at {back[0]:g}, which recovers, as at {stuck[0]:g}, which does "
                     "not, so it does not explain the difference; what these runs show is where this much fine-tuning "
                     "stops recovering" + (f", between {lo:g} and {hi:g}" if lo < hi else "") + ". ")
        elif stuck:
            first = get[("random", stuck[0])]
            shares = sd.shares(first, "finetuned_positive_share")
            constant = shares is not None and all(not 0.01 < x < 0.99 for x in shares)
            text += (f"{mechanism}; fine-tuning ends " + ("at a constant answer, a cheap minimum of the loss on "
                                                          "balanced data" if constant else "at chance") + ". ")
        if stuck:
            text += ("Whether longer or faster training would rebuild the features where it stays at chance was not "
                     "measured here (the sheet fine-tunes 5 epochs).")
        out.append(text.rstrip())
    per = []
    for s in sps:
        if f"random_finetuned.s{s:g}.vs_fp32" in r:
            part = f"at {s:g}: {get[('random', s)]['finetuned']:.4f}, {r[f'random_finetuned.s{s:g}.vs_fp32'].says}"
            if f"random_finetuned.s{s:g}.vs_l1" in r:
                part += (f"; against L1's {get[('l1-norm', s)]['finetuned']:.4f}, "
                         f"{r[f'random_finetuned.s{s:g}.vs_l1'].says}")
            per.append(part)
    if per:
        out.append("**Fine-tuned random pruning against fp32 and L1, per sparsity** (random minus the other): "
                   + "; ".join(per) + ".")
    return out


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

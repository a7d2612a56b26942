"""Lab 1b's answers as Markdown from its numbers (the figure JSON's ``numbers``), unit-tested; the seed reads and
notes are Lab 1a's (``answers.lab1_quantize``)."""
from __future__ import annotations

from ..readings import by_key
from ..readings import lab1_prune as _p
from ..readings.tables import test_set_se as se
from .lab1_quantize import _Seeds, chance_note

PRUNE_BASE_NOTE = ("The sheet prunes the best model of its Task 1 (the quantization sweep); labkit prunes the fp32 "
                   "SFT model, so pruning is measured on its own, not on top of quantization (Lab 2's "
                   "compression-aware search combines the two).")


def pruning(p: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1b from ``pruning.json`` numbers, wording ``labkit.readings.lab1_prune``."""
    sd = _Seeds(p)
    r = by_key(_p.read(p, settings))
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
                l1_seeds = sd.of(get[("l1-norm", s)], "finetuned")
                flat = sd.seeds_at_chance(get[("l1-norm", s)], "finetuned")
                if flat and len(flat) < len(l1_seeds):  # a seed where L1 collapsed compares two models at chance
                    part += (f" (L1 itself ended at chance in seed{'s' if len(flat) > 1 else ''} "
                             f"{', '.join(str(i + 1) for i in flat)} of {len(l1_seeds)}, where both answer one "
                             "class: that seed's difference of about 0 compares nothing)")
            per.append(part)
    if per:
        out.append("**Fine-tuned random pruning against fp32 and L1, per sparsity** (random minus the other): "
                   + "; ".join(per) + ".")
    return out


def render(payloads: dict, folder=None) -> str:
    """``prune_answers.md`` from the stored ``pruning`` result."""
    from .sources import header

    p = payloads["pruning"]
    return (header("Lab 1b: pruning, random vs L1-norm, weights and activations", payloads,
                   "notebooks/lab1_prune.ipynb")
            + "\n\n" + "\n".join("- " + b for b in pruning(p["numbers"], p["settings"])) + "\n")

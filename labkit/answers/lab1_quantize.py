"""Lab 1a's answers (and what Lab 1b's share with them) as Markdown from its numbers (the figure JSON's ``numbers``), unit-tested.

Results hold one model per training seed (``labkit.readings.seeds``): every comparison of two accuracies is a
difference over seeds whose uncertainty combines the seed spread with the test-set standard error, and it
is called established only when every seed agrees on its sign and it exceeds two of those errors. QAT and
fine-tuned pruning are compared with the fp32 model trained for the same extra epochs (``control``), not
only with the untouched base, since extra training alone can raise accuracy.
"""
from __future__ import annotations

from ..readings import by_key
from ..readings import lab1_quantize as _q
from ..readings.stats import IN_WORDS
from ..readings.tables import test_set_se as se

BASE_NOTE = ("The sheet starts Lab 1 from Lab 0's LoRA model; labkit starts from the SFT model (every weight but "
             "the frozen embeddings fine-tuned, no adapter to merge first), so absolute numbers are not the sheet's.")

# --- what the notebook says beside its figure ---------------------------------------------------------------


# --- the answers ------------------------------------------------------------------------------------------

def chance_note(acc: float, share, n: int) -> str:
    """Why an accuracy sits at chance: one class predicted for (almost) every review. ``share``: the share of
    positive predictions, or one per training seed."""
    shares = [share] if share is None or isinstance(share, (int, float)) else list(share)
    if None in shares or not _q.at_chance(acc, n):
        return ""
    constant = [x <= 0.01 or x >= 0.99 for x in shares]
    if all(constant):
        if len(shares) > 1:
            pos = sum(x >= 0.99 for x in shares)
            every = all(x in (0.0, 1.0) for x in shares)
            return (f"predicts one class for {'every review' if every else 'all or nearly all reviews'} in each of "
                    f"its {len(shares)} seeds (positive in {pos}, negative in the others; positive shares "
                    + "/".join(f"{x:.5g}" for x in shares) + "): the logits no longer depend on the input, so "
                    "accuracy is the class balance, 0.500")
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

    def spread(self, d: dict, key: str) -> str:
        vals = self.of(d, key)
        return f"{d[key]:.4f}" + (f" (seeds {'/'.join(f'{v:.4f}' for v in vals)})" if self.k > 1 else "")

    def intro(self, profile: str | None) -> str:
        if self.k > 1:
            return (f"{self.k} training seeds (one SFT model each, and every later training with the same seed); "
                    "numbers are means over seeds, and each difference is given as mean ± one SE combining the seed "
                    f"spread with the test-set error, {IN_WORDS}.")
        why = " (the quick profile trains one to stay within its time budget)" if profile == "quick" else ""
        return (f"One training seed{why}: the seed spread is not measured, so differences below are judged on the "
                "test-set error alone (± shows it) and what another seed would change is unknown.")


def quantization(q: dict, settings: dict) -> list[str]:
    """Bullets for Lab 1a from ``quantization.json`` numbers, wording ``labkit.readings.lab1_quantize``."""
    sd = _Seeds(q)
    r = by_key(_q.read(q))
    fp32, n, rows = q["fp32"], sd.n, q["rows"]
    by_w = {row["width"]: row for row in rows}
    ctrl = q.get("control")
    out = [f"**Base.** {BASE_NOTE} fp32 SFT model: {sd.spread(q, 'fp32')} on {n:,} test reviews (one test-set SE "
           f"{se(fp32, n):.4f}). {sd.intro(settings.get('profile'))}"]
    text = "**PTQ.** "
    if 8 in by_w:
        text += (f"int8 PTQ scores {by_w[8]['ptq']:.4f}, {r['ptq8_vs_fp32'].says} from fp32: "
                 f"{r['ptq8_within_1_point'].says}; ")
        if "ptq8_vs_sheet_rule" in r:
            text += (f"the sheet's single frac-4 rule scores {q['sheet_rule_int8_frac4_ptq']:.4f}, and calibrated "
                     f"int8 minus it is {r['ptq8_vs_sheet_rule'].says}; ")
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
                   f"{max(abs(row['ptq'] - fp32) for row in wide16):.2g} of fp32: the rounding error is far below the "
                   "weights' own spread.")
    return out


def render(payloads: dict, folder=None) -> str:
    """``quantize_answers.md`` from the stored ``quantization`` result (``results.load_results``)."""
    from .sources import header

    p = payloads["quantization"]
    return (header("Lab 1a: fixed-point quantization, PTQ and QAT", payloads, "notebooks/lab1_quantize.ipynb")
            + "\n\n" + "\n".join("- " + b for b in quantization(p["numbers"], p["settings"])) + "\n")



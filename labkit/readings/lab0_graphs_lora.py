"""Lab 0's readings: SFT above chance, LoRA against SFT and against the equal-training control, the merge
keeping the model, and the dropout-removal check, from ``accuracy.json``'s numbers."""
from __future__ import annotations

import dataclasses
import math

from . import seeds as _seeds
from . import stats
from .core import Reading, check, compare

# the findings the committed results state, as claims (labkit.readings.core.compute): LoRA trails SFT's fine-tuning
# at equal training, and the extra epoch the control trains raises the SFT model
CLAIMS = {"lora_vs_control": ('lower',), "extra_epoch": ('higher',)}

SOURCE = "accuracy"
CHANCE = 0.5  # IMDb is balanced
EXACT_GAP = 1e-3  # an fp32 logit gap below this is rounding, not a different model


def merge_flips(n: int, accuracy: float) -> int:
    """Net reviews a merge may move: one test-set standard error of ``accuracy`` in reviews. The fp32 logit gap
    shows the merge itself is exact; the evaluations run in bf16 autocast, where W x + B(A x) and (W + BA) x
    round differently (8 significant bits), flipping reviews near the boundary. Less than one SE: below the
    precision any accuracy here is quoted to."""
    return max(1, math.floor(math.sqrt(n * accuracy * (1 - accuracy))))


ONE_SEED = "With one training seed, what another seed would change is unknown, so this is not called a difference " \
           "between the methods."


def one_seed_aware(r: Reading, says: str) -> Reading:
    """With one training seed what another seed would change is unknown: such a comparison is not called a
    difference between the methods, whatever its size against the test-set error (``says``: its sentence)."""
    if r.quantities["seeds"] > 1:
        return r
    return dataclasses.replace(r, verdict="not established", says=says.format(**r.quantities))


def lora_vs_sft(sft: list[float], lora: list[float], n: int) -> Reading:
    head = f"LoRA minus SFT on {n:,} test reviews: {{text}}. "
    d = stats.difference(list(lora), list(sft), n)
    said = {"higher": head + "Every seed agrees and it exceeds {t:.2f} SE: a measurable gain.",
            "lower": head + "Every seed agrees and it exceeds {t:.2f} SE: a measurable loss.",
            "level": head + ("The seeds disagree on its sign: no difference is established." if d.sign_changes else
                             "Within {t:.2f} SE: no difference is established.")}
    r = compare("lora_vs_sft", list(lora), list(sft), n, source=SOURCE, says=said, names=("LoRA", "SFT"))
    return one_seed_aware(r, head + ONE_SEED)


def read(numbers: dict) -> list[Reading]:
    k, n = _seeds.count(numbers), numbers["sft"]["n"]
    sft = _seeds.values(numbers["sft"], "accuracy", k)
    lora, merged = _seeds.values(numbers["lora"], "accuracy", k), _seeds.values(numbers["merged"], "accuracy", k)
    bar = CHANCE + 2 * stats.accuracy_se(CHANCE, n)
    out = [check("sft.above_chance", all(a > bar for a in sft),
                 f"above chance by more than 2 SE in {'every one' if k > 1 else 'its one'} of its "
                 f"{k} training seed{'s' if k > 1 else ''}",
                 f"**not** above chance by 2 SE in every training seed ({'/'.join(f'{a:.4f}' for a in sft)})",
                 source=SOURCE, rule="every seed's accuracy > 0.5 + 2 test-set SE of 0.5",
                 quantities={"sft_seeds": sft, "bar": bar, "n": n}),
           lora_vs_sft(sft, lora, n)]
    gap = max(_seeds.values(numbers, "merge_max_logit_diff", k))
    flips = [round((m - lo) * n) for m, lo in zip(merged, lora)]
    allowed = [merge_flips(n, a) for a in lora]
    net = "/".join(f"{f:+d}" for f in flips)
    out.append(check("merge.keeps_model", all(abs(f) <= a for f, a in zip(flips, allowed)) and gap < EXACT_GAP,
                     f"the merged model is the adapted one: a net {net} of {n:,} reviews per seed, within one "
                     f"test-set SE ({'/'.join(map(str, allowed))} reviews), and an fp32 logit gap of {gap:.1e}",
                     f"the merged model is **not** the adapted one: a net {net} of {n:,} reviews per seed (one "
                     f"test-set SE: {'/'.join(map(str, allowed))}) and an fp32 logit gap of {gap:.1e}",
                     source=SOURCE, rule=f"|net reviews moved| <= one test-set SE in every seed and fp32 logit gap "
                                         f"< {EXACT_GAP:g}",
                     quantities={"flips": flips, "allowed": allowed, "max_logit_gap": gap}))
    if "control" in numbers:
        acc = numbers["accuracy"]
        ctrl, base = _seeds.values(acc, "SFT + 1 epoch", k), _seeds.values(acc, "SFT", k)
        out.append(one_seed_aware(compare("extra_epoch", ctrl, base, n, source=SOURCE, names=("SFT + 1 epoch", "SFT"),
                                          says={v: "{text}" for v in ("higher", "lower", "level")}), "{text}"))
        sft_ft = "SFT's fine-tuning (every weight but the frozen embeddings)"
        at_equal = {"higher": f"{{text}}, so at equal training the adapters are better than {sft_ft} here.",
                    "lower": f"{{text}}, so at equal training the adapters are worse than {sft_ft} here.",
                    "level": f"{{text}}, so at equal training LoRA and {sft_ft} are not told apart."}
        r = compare("lora_vs_control", lora, ctrl, n, source=SOURCE, says=at_equal, names=("LoRA", "SFT + 1 epoch"))
        out.append(one_seed_aware(r, "{text}, so at equal training LoRA and SFT's fine-tuning are not told apart (one "
                                     "training seed)."))
    if numbers.get("dropout_removed") is not None:
        out.append(dropout_removed(numbers["dropout_removed"]))
    return out


def dropout_removed(removed: dict) -> Reading:
    """Whether the dropout-free training-mode graph computes the eval-mode model (``removed``: what the remove
    pass did: ``after`` dropout nodes left, ``seed_gap`` between two seeds, ``eval_gap`` to the eval model)."""
    return check("dropout.removed_is_eval",
                 removed["after"] == 0 and removed["seed_gap"] == 0 and removed["eval_gap"] < 1e-5,
                 "the training-mode graph without dropout is deterministic and computes the eval-mode model",
                 "it does **not** yet behave as the eval-mode model", source=SOURCE,
                 rule="no dropout node left, two seeds give equal logits, eval-mode gap < 1e-5",
                 quantities=dict(removed), expect=False)


def readings(payloads: dict) -> list[Reading]:
    p = payloads.get(SOURCE)
    return [] if p is None else read(p["numbers"])


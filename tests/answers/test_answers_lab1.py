"""Lab 1's answers from numbers: the committed full-profile JSON and doctored variants."""
import copy
import json
import re
from pathlib import Path

from labkit.answers import lab1_prune, lab1_quantize

from _results import one_seed

FIG = Path(__file__).resolve().parents[2] / "figures" / "lab1"
S = {"qat_epochs": 0.5, "prune_epochs": 0.5, "finetune_lr": 5e-5, "prune_scope": "local"}


DATA = Path(__file__).resolve().parents[1] / "data"


def _numbers(name):
    """The committed result's means, as one seed (the doctored tests change means)."""
    return one_seed(json.loads((FIG / f"{name}.json").read_text())["numbers"])


def _h200(name):
    """An earlier committed result (H200, no equal-training control, no predicted-class shares): the case
    where the answers must say what was not measured."""
    return json.loads((DATA / f"h200_lab1_{name}.json").read_text())["numbers"]


def test_quantization_without_a_control_says_so_and_names_the_base():
    text = " ".join(lab1_quantize.quantization(_h200("quantization"), S))
    assert "No equal-training fp32 control" in text and "LoRA model" in text
    assert "int8 PTQ scores 0.8584" in text


def test_quantization_reads_qat_against_the_equal_training_control():
    q = copy.deepcopy(_numbers("quantization"))
    top = max(r["qat"] for r in q["rows"] if r["width"] >= 8)
    q["control"] = {"epochs": 0.5, "accuracy": top + 0.003}
    for r in q["rows"]:
        if r["width"] >= 8:
            r["qat"] = top + 0.004  # QAT above the untouched model by ~0.01: beyond 2 test-set SE
    text = " ".join(lab1_quantize.quantization(q, S))
    assert "QAT minus the control is not established at any width" in text
    assert "extra training, not quantization" in text
    q["control"]["accuracy"] = q["fp32"]  # extra training bought nothing: now QAT beats it
    text = " ".join(lab1_quantize.quantization(q, S))
    assert "QAT minus the control is established above zero at widths [8, 12" in text
    assert "extra training, not quantization" not in text


def test_quantization_with_seeds_that_disagree_establishes_nothing():
    from labkit.readings import seeds

    q = _numbers("quantization")
    per = []
    for shift in (-0.02, 0.02, 0.02):  # QAT - PTQ changes sign between seeds
        x = copy.deepcopy(q)
        for r in x["rows"]:
            r["qat"] = r["ptq"] + shift
        per.append({k: v for k, v in x.items() if k != "dataset_sizes"})
    combined = {**seeds.combine(per, [0, 1, 2]), "dataset_sizes": q["dataset_sizes"]}
    text = " ".join(lab1_quantize.quantization(combined, S))
    assert "3 training seeds" in text and "QAT minus PTQ is not established at any width" in text
    # int8 PTQ against fp32 is the same in the three copies: shown per seed, and not established
    assert re.search(r"[-+]?\d\.\d{4} ± \d\.\d{4} \(per seed (-?\d\.\d{4})/\1/\1; not (established \(within "
                     r"\d\.\d\d SE\)|resolvable at [\d,]+ test reviews)\)", text)


def test_chance_explained_by_a_constant_answer_only_when_the_shares_say_so():
    assert "predicts positive for 100.0% of reviews" in lab1_quantize.chance_note(0.5, 1.0, 25000)
    assert "guessing, not a constant answer" in lab1_quantize.chance_note(0.5, 0.52, 25000)
    assert lab1_quantize.chance_note(0.8, 1.0, 25000) == ""  # not at chance: nothing to explain


def test_pruning_answers_follow_the_numbers():
    p = copy.deepcopy(_h200("pruning"))
    text = " ".join(lab1_prune.pruning(p, S))
    assert "Random pruning before fine-tuning is at chance at sparsities [0.3, 0.4" in text
    assert "L1 at 0.8 falls from 0.5377 to 0.5000" in text and "did not record the share" in text
    assert "No unpruned model trained for the same epochs" in text
    assert "prunes the fp32 SFT model" in text  # the sheet's start (Task 1's best model) is named as replaced
    for r in p["rows"]:
        r["pruned_positive_share"] = r["finetuned_positive_share"] = 0.0
    text = " ".join(lab1_prune.pruning(p, S))
    assert "predicts negative for 100.0% of reviews" in text and "settled on a constant answer" in text
    p["rows"].append({**p["rows"][-5], "scope": "global", "pruned": 0.70, "finetuned": 0.80})  # L1 at 0.5
    text = " ".join(lab1_prune.pruning(p, S))
    assert "at 0.5: local 0.8443 / 0.8548, global 0.7000 / 0.8000" in text
    assert "right after pruning, global minus local is established above zero at sparsities none and below zero " \
           "at [0.5]" in text
    assert "after fine-tuning, global minus local is established above zero at sparsities none and below zero at " \
           "[0.5]" in text


def test_pruning_says_where_random_stays_at_chance_after_fine_tuning_and_why():
    p = json.loads((FIG / "pruning.json").read_text())["numbers"]
    at = [r["sparsity"] for r in p["rows"] if r["method"] == "random" and all(abs(v - 0.5) < 0.0064 for v in
                                                                            r.get("finetuned_seeds", [r["finetuned"]]))]
    text = " ".join(lab1_prune.pruning(p, {**S, "profile": "full"}))
    assert f"Random pruning after fine-tuning is at chance at sparsities {at}" in text
    # random pruning recovers at 0.3 and not from 0.5 up: the text follows that, and does not offer the random
    # mask (true at every sparsity) as the reason one recovers and the other does not
    assert "**What fine-tuning recovers of random pruning.**" in text and "Why fine-tuning does not" not in text
    r03 = next(r for r in p["rows"] if r["method"] == "random" and r["sparsity"] == 0.3)
    assert f"at 0.3 it comes back from chance ({r03['pruned']:.4f}) to {r03['finetuned']:.4f}" in text
    assert f"at {at[0]:g} it stays at chance" in text and "does not explain the difference" in text
    assert f"between 0.3 and {at[0]:g}" in text and "5 epochs" in text
    assert f"at 0.3: {r03['finetuned']:.4f}, " in text and ": below fp32; against L1's" in text


def test_qat_at_the_narrowest_width_is_read_as_recovering_only_off_chance():
    q = copy.deepcopy(_numbers("quantization"))
    low = min(q["rows"], key=lambda r: r["width"])
    low["ptq"], low["qat"] = 0.5, 0.5
    assert f"At {low['width']} bits QAT stays at chance 0.5000 -> 0.5000" in " ".join(lab1_quantize.quantization(q, S))
    low["qat"] = 0.8
    assert f"At {low['width']} bits QAT recovers 0.5000 -> 0.8000" in " ".join(lab1_quantize.quantization(q, S))

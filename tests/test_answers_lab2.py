"""Lab 2's answers read their data right: collapsed depths, post-training and its control, each search against its start."""
import pytest

from labkit.answers import lab2, lab3
from labkit.results import load_results


def test_collapse_is_counted_per_depth_and_read_against_the_winner():
    trials = {"s": [{"params": {"num_hidden_layers": 2}, "value": 0.86}, {"params": {"num_hidden_layers": 8}, "value": 0.5},
                    {"params": {"num_hidden_layers": 8}, "value": 0.84}, {"params": {"num_hidden_layers": 4}, "value": 0.501}]}
    by = lab2.collapse_by_depth(trials, 25_000)
    assert by == {2: {"trials": 1, "at_chance": 0}, 4: {"trials": 1, "at_chance": 1}, 8: {"trials": 2, "at_chance": 1}}
    text = lab2.collapse_text(by, 5e-4, {"num_hidden_layers": 2})
    assert "**2 of 4 trials ended at chance**" in text and "8 layers: 1 of 2 (50%)" in text
    assert "cannot say that the small architecture is the better one" in text
    assert lab2.collapse_text({2: {"trials": 3, "at_chance": 0}}, 5e-4, {}).startswith("No trial ended at chance")


def test_post_training_gives_median_and_spread_and_names_the_missing_control():
    trials = [{"accuracy_trained": 0.86, "accuracy_compressed": 0.85, "accuracy_post_trained": 0.85 + d}
              for d in (0.01, 0.012, 0.015, 0.02, 0.19)]
    text = lab2.post_training_text(trials, 0.86, 25_000, 0.5)
    assert "median +0.0150" in text and "range +0.0100 to +0.1900" in text and "carries the mean" in text
    assert "4 of 5 post-trained models end above their own uncompressed accuracy" in text
    assert "no equal-training control" in text and "does not show that post-training recovers" in text
    assert "No equal-training control was trained for these results" in text


def test_collapse_names_the_warmup():
    by = {2: {"trials": 4, "at_chance": 0}, 8: {"trials": 4, "at_chance": 2}}
    text = lab2.collapse_text(by, 5e-4, {"num_hidden_layers": 2}, warmup=0.1)
    assert "lr 0.0005 with a linear warm-up over the first 10% of the steps" in text
    assert "even with warm-up" in text and "were not given a setting" not in text
    assert "warm-up over" not in lab2.collapse_text(by, 5e-4, {"num_hidden_layers": 2})


def _post(deltas, control_deltas):
    """Trials: trained 0.86, compressed 0.85, post-trained 0.85 + d, control 0.86 + c."""
    return [{"accuracy_trained": 0.86, "accuracy_compressed": 0.85, "accuracy_post_trained": 0.85 + d,
             "accuracy_control": 0.86 + c} for d, c in zip(deltas, control_deltas)]


def test_post_training_is_read_against_its_control():
    # post-training raises the compressed models, but the uncompressed ones trained as long end higher still
    behind = _post([0.01, 0.012, 0.015, 0.02, 0.19], [0.02, 0.02, 0.02, 0.02, 0.02])
    g = lab2.post_vs_control(behind)
    assert g["median"] == pytest.approx(-0.015) and g["above_zero"] == 1 and g["trials"] == 5
    assert g["q1"] == pytest.approx(-0.018) and g["q3"] == pytest.approx(-0.01)
    assert g["control_gain"]["median"] == pytest.approx(0.02)
    text = lab2.post_training_text(behind, 0.86, 25_000, 0.5, 1e-4)
    assert "Against its equal-training control" in text and "**median -0.0150**" in text
    assert "1 of 5 trials above 0" in text and "interquartile range -0.0180 to -0.0100" in text
    assert "at lr 0.0001" in text and "beat their equal-training control" not in text
    assert "no equal-training control" not in text.lower()
    # ahead of the control in three quarters of the trials or more: the gain is called established
    ahead = lab2.post_training_text(_post([0.03, 0.03, 0.04, 0.05], [0.0, 0.01, 0.0, 0.01]), 0.86, 25_000, 0.5)
    assert "**The post-trained compressed models beat their equal-training control**" in ahead
    # straddling zero: not established either way
    mixed = lab2.post_training_text(_post([0.0, 0.01, 0.02, 0.03], [0.005, 0.005, 0.005, 0.005]), 0.86, 25_000, 0.5)
    assert "is not established" in mixed
    assert lab2.post_vs_control([{"accuracy_post_trained": 0.8}]) is None


def test_post_training_names_the_trials_at_chance_that_carry_its_mean():
    """Two of four trials at chance after training: post-training lifts both compressed copies, the control one."""
    trials = _post([0.01, 0.0], [0.01, 0.0]) + [
        {"accuracy_trained": 0.5, "accuracy_compressed": 0.5, "accuracy_post_trained": 0.82, "accuracy_control": 0.5},
        {"accuracy_trained": 0.5, "accuracy_compressed": 0.5, "accuracy_post_trained": 0.68, "accuracy_control": 0.6}]
    text = lab2.post_training_text(trials, 0.86, 25_000, 0.5)
    assert ("2 of 4 trials were at chance after training: post-training lifted 2 of their compressed copies off it "
            "(to 0.6800-0.8200), the same training 1 of their controls") in text
    assert "These trials make the mean" in text
    assert "were at chance" not in lab2.post_training_text(_post([0.01, 0.0], [0.01, 0.0]), 0.86, 25_000, 0.5)
    stuck = lab2.post_training_text(trials[:3] + [{**trials[3], "accuracy_post_trained": 0.5}], 0.86, 25_000, 0.5)
    assert "lifted 1 of their compressed copies off it (to 0.8200-0.8200)" in stuck
    none = lab2.post_training_text(trials[:2] + [{**t, "accuracy_post_trained": 0.5} for t in trials[2:]],
                                   0.86, 25_000, 0.5)
    assert "lifted 0 of their compressed copies off it, the same training" in none and "make the mean" not in none


def test_each_compression_search_is_read_against_its_start():
    """Task 1's best runs first in every Task 2 search (trial 0, or its retry after a failure): a search whose best
    is its start found nothing better, and only a gap beyond two test-set standard errors counts as beating it."""
    def study(start, others, retried=False):
        first = {"number": 5, "retry_of": 0} if retried else {"number": 0}
        return [{**first, "value": start}] + [{"number": i + 1, "value": v} for i, v in enumerate(others)]

    flat = lab2.start_text({"no compression": study(0.86, [0.85, 0.861]), "compressed": study(0.85, [0.84], True)},
                           25_000)
    assert "no compression 0.8600 -> best 0.8610 (+0.5 test-set SE)" in flat
    assert "compressed 0.8500 -> best 0.8500 (the start itself)" in flat
    assert "**No search beat its start by more than two test-set standard errors**" in flat
    found = lab2.start_text({"no compression": study(0.86, [0.85]), "compressed": study(0.85, [0.856])}, 25_000)
    assert "only compressed beat its start" in found and "the others did not" in found
    assert lab2.start_text({"compressed": [{"number": 3, "value": 0.8}]}, 25_000) == ""  # start not completed



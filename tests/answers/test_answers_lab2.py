"""Lab 2's answers word its readings: the samplers' verdict, collapsed depths, post-training and its control, each
search against its start; the verdicts come from ``labkit.readings.lab2_search`` and flip with the numbers."""
import math
import re

import pytest

from labkit.answers import lab2_search as lab2
from labkit.readings import lab2_search as r2
from labkit.readings import stats, tables
from labkit.search import band


def bands(finals: dict[str, list[float]], trials: int = 20) -> dict:
    # curves that end at the given finals (rising to them), one per seed
    return {name: band([[v - 0.01 * (trials - 1 - i) for i in range(trials)] for v in values])
            for name, values in finals.items()}


def _sampler_text(finals, n=25_000, grid=300, trials=20):
    b = bands(finals, trials)
    by = {r.key: r for r in r2.sampler_readings(b, n)}
    text = lab2.sampler_text(tables.sampler_rows(b), by, grid)
    assert all(r.says in text for r in by.values())
    return by, text


def test_sampler_text_names_a_winner_only_beyond_two_standard_errors():
    by, clear = _sampler_text({"random": [0.80, 0.81, 0.80], "grid": [0.79, 0.80, 0.79], "tpe": [0.86, 0.87, 0.86]})
    assert by["samplers.verdict"].verdict == "higher"
    assert "**TPE wins**" in clear and "tpe 0.8633" in clear and "Grid trails tpe by 0.0700" in clear
    by, tie = _sampler_text({"random": [0.84, 0.87, 0.85], "grid": [0.83, 0.86, 0.84], "tpe": [0.86, 0.84, 0.87]})
    assert "**No sampler can be called better at this budget**" in tie and "wins" not in tie
    assert "20 trials cover 7% of it" in tie and "trails" not in tie
    # a lead of 0.0010 with every seed apart is still within t SE once the test set's error is counted
    by, low = _sampler_text({"random": [0.860, 0.859, 0.860], "grid": [0.858, 0.858, 0.858],
                             "tpe": [0.859, 0.861, 0.860]})
    assert by["samplers.verdict"].verdict == "level" and "Grid is level with tpe as well" in low
    assert re.search(r"within \d\.\d\d SE", low), low


def test_sampler_text_with_one_seed_and_a_short_budget():
    by, text = _sampler_text({"random": [0.7], "grid": [0.69], "tpe": [0.71]}, n=500, grid=8, trials=4)
    assert by["samplers.verdict"].verdict == "not established"
    assert "with one seed per sampler the spread over seeds is not measured" in text
    assert "with 4 trials it never modelled anything" in text


def _best_text(trials, params, warmup=0.0):
    by = {r.key: r for r in r2.best_readings({"study": "s", "trial": 0, "value": max(t["value"] for t in trials["s"]),
                                              "params": params}, trials, 25_000, None)}
    by["collapse.by_depth"] = r2.collapse_reading(trials, 25_000)
    text = lab2.best_text({"params": params}, by, {"lr": 5e-4, "warmup": warmup})
    assert all(r.says in text for r in by.values())
    return text


def test_collapse_is_counted_per_depth_and_read_against_the_best():
    trials = {"s": [{"number": 0, "params": {"num_hidden_layers": 2}, "value": 0.86},
                    {"number": 1, "params": {"num_hidden_layers": 8}, "value": 0.5},
                    {"number": 2, "params": {"num_hidden_layers": 8}, "value": 0.84},
                    {"number": 3, "params": {"num_hidden_layers": 4}, "value": 0.501}]}
    assert r2.collapse_by_depth(trials, 25_000) == {2: {"trials": 1, "at_chance": 0}, 4: {"trials": 1, "at_chance": 1},
                                                      8: {"trials": 2, "at_chance": 1}}
    text = _best_text(trials, {"num_hidden_layers": 2})
    assert "**2 of 4 trials ended at chance**" in text and "8 layers: 1 of 2 (50%)" in text
    assert "The 4/8-layer models at chance did not train at lr 0.0005 from random" in text
    assert "**This architecture is not established as the best one**" in text
    assert "not which architecture or depth is better" in text
    warm = _best_text(trials, {"num_hidden_layers": 2}, warmup=0.1)
    assert "lr 0.0005 with a linear warm-up over the first 10% of the steps" in warm
    fine = {"s": [{"number": i, "params": {"num_hidden_layers": 2}, "value": v} for i, v in enumerate((0.86, 0.85))]}
    assert "No depth lost a tenth of its trials to chance" in _best_text(fine, {"num_hidden_layers": 2})


def _post(deltas, control_deltas):
    """Trials: trained 0.86, compressed 0.85, post-trained 0.85 + d, control 0.86 + c."""
    return [{"accuracy_trained": 0.86, "accuracy_compressed": 0.85, "accuracy_post_trained": 0.85 + d,
             "accuracy_control": 0.86 + c} for d, c in zip(deltas, control_deltas)]


def _post_text(trials):
    by = {r.key: r for r in r2.post_readings(trials, 25_000)}
    text = lab2.post_text(by, {"post_epochs": 0.5, "post_lr": 1e-4})
    assert all(r.says in text for r in by.values())
    return by, text


def test_post_training_names_the_missing_control():
    trials = [{"accuracy_trained": 0.86, "accuracy_compressed": 0.85, "accuracy_post_trained": 0.85 + d}
              for d in (0.01, 0.012, 0.015, 0.02, 0.19)]
    by, text = _post_text(trials)
    assert "median +0.0150" in text and "range +0.0100 to +0.1900" in text
    assert "No equal-training control was trained for these results" in text
    assert "does not show that post-training recovers" in text
    assert by["post.vs_control"].verdict == "not established"


def test_post_training_is_read_against_its_control_by_the_rule_of_replicates():
    # post-training raises the compressed models, but the uncompressed ones trained as long end higher still
    by, behind = _post_text(_post([0.01, 0.012, 0.015, 0.02, 0.011], [0.02, 0.021, 0.02, 0.022, 0.02]))
    assert by["post.vs_control"].verdict == "lower"
    assert "**The uncompressed model given the same training stays ahead**" in behind and "about as far" not in behind
    assert "at lr 0.0001" in behind and "1 of 5 above 0" not in behind
    by, ahead = _post_text(_post([0.03, 0.03, 0.04, 0.05], [0.0, 0.01, 0.0, 0.01]))
    assert "**The post-trained compressed models end above their equal-training control**" in ahead
    # straddling zero: level, said as not told apart (never "about as far as": level is not shown equal)
    by, mixed = _post_text(_post([0.0, 0.01, 0.02, 0.03], [0.005, 0.015, 0.005, 0.025]))
    assert by["post.vs_control"].verdict == "level" and "stays ahead" not in mixed
    assert "are not told apart" in mixed and "about as far" not in mixed
    assert tables.post_vs_control([{"accuracy_post_trained": 0.8}]) is None


def test_post_training_reads_the_trials_at_chance_apart():
    """Two of four trials at chance after training: post-training lifts both compressed copies, the control one;
    the trials that trained are read on their own."""
    trials = _post([0.01, 0.0, 0.005], [0.01, 0.0, 0.004]) + [
        {"accuracy_trained": 0.5, "accuracy_compressed": 0.5, "accuracy_post_trained": 0.82, "accuracy_control": 0.5},
        {"accuracy_trained": 0.5, "accuracy_compressed": 0.5, "accuracy_post_trained": 0.68, "accuracy_control": 0.6}]
    by, text = _post_text(trials)
    assert ("2 of 5 trials were at chance after training: post-training lifted 2 of their compressed copies off it "
            "(to 0.6800-0.8200), the same training 1 of their 2 controls") in text
    assert by["post.vs_control_trained"].quantities["k"] == 3
    assert "Over the 3 trials that left chance in training" in text
    _, plain = _post_text(_post([0.01, 0.0], [0.01, 0.0]))
    assert "were at chance" not in plain


def test_each_compression_search_is_read_against_its_start_and_not_established_without_fresh_seeds():
    """Task 1's best runs first in every Task 2 search (trial 0, or its retry after a failure); a best above it on one
    seed is a best of N, so not established; the SE is that of the difference of two accuracies."""
    def study(start, others, retried=False):
        first = {"number": 5, "retry_of": 0} if retried else {"number": 0}
        return [{**first, "value": start}] + [{"number": i + 1, "value": v} for i, v in enumerate(others)]

    by = {r.key: r for r in r2.start_readings({"no compression": study(0.86, [0.85, 0.87]),
                                               "compressed": study(0.85, [0.84], True)}, 25_000, None)}
    text = lab2.start_text(by, remeasured=False)
    assert all(r.says in text for r in by.values())
    se = (0.87 * 0.13 / 25_000 + 0.86 * 0.14 / 25_000) ** 0.5
    assert by["start.no compression"].quantities["se"] == pytest.approx(se)
    assert f"no compression: in the search 0.8600 -> best 0.8700 (trial 2), +0.0100 ± {se:.4f}" in text
    assert "(not established: a selection from" in text
    assert "compressed: its best is its start (0.8500): no trial beat it" in text
    assert "**No search's best is established above its start**" in text and "biased upwards" in text
    missing = r2.start_readings({"compressed": [{"number": 3, "value": 0.8}]}, 25_000, None)
    assert missing[0].says == "compressed: its start (Task 1's best) is not among its completed trials"


def test_compression_text_reads_compressions_cost_by_its_reading():
    trials = [{"accuracy_trained": 0.80 + i / 100, "accuracy_compressed": 0.79 + i / 100 - i / 1000} for i in range(4)]
    r = r2.compression_reading(trials, 8, 0.5)
    num = {"best": {"no compression": 0.82, "compressed": 0.80, "compressed + post-training": 0.81},
           "start": {"study": "s", "value": 0.82},
           "within_trial": {"post-training after compression": {"mean": 0.01, "min": 0.0, "max": 0.02, "trials": 2}}}
    text = lab2.compression_text(num, {"quant_width": 8, "prune_sparsity": 0.5, "post_epochs": 0.5},
                                 {"compression.effect": r}, 25_000)
    assert r.verdict == "lower" and r.says in text and "**Compression costs accuracy**" in text
    assert "An objective measured after compression therefore scores architectures below the uncompressed one" in text


def test_compression_cost_leaves_out_trials_at_chance_and_counts_the_losses():
    # two trials answer one class before and after (0.5 -> 0.5): their zeros say nothing about compression
    lost = [-0.046, -0.006, -0.007, -0.008, -0.005, 0.0002, -0.001, -0.0075, -0.0006]
    trials = [{"accuracy_trained": 0.85, "accuracy_compressed": 0.85 + x} for x in lost]
    trials += [{"accuracy_trained": 0.5, "accuracy_compressed": 0.5}] * 2
    r = r2.compression_reading(trials, 8, 0.5, 25_000)
    assert r.quantities["k"] == 9 and r.quantities["at_chance"] == 2 and r.quantities["below"] == 8
    mean = sum(lost) / 9
    spread = (sum((x - mean) ** 2 for x in lost) / 8 / 9) ** 0.5
    test = math.hypot(stats.accuracy_se(0.85 + mean, 25_000), stats.accuracy_se(0.85, 25_000))  # shared reviews
    assert r.quantities["mean"] == pytest.approx(mean) and r.quantities["se"] == pytest.approx(math.hypot(spread, test))
    assert r.verdict == "level"  # |mean| < t SE: one architecture's -0.046 dominates the spread
    assert "8 of 9 below 0; 2 trials at chance after training left out" in r.says
    num = {"best": {"no compression": 0.86, "compressed": 0.85, "compressed + post-training": 0.86},
           "start": {"study": "s", "value": 0.86},
           "within_trial": {"post-training after compression": {"mean": 0.01, "min": 0.0, "max": 0.02, "trials": 2}}}
    text = lab2.compression_text(num, {"quant_width": 8, "prune_sparsity": 0.5, "post_epochs": 0.5},
                                 {"compression.effect": r}, 25_000)
    assert "is not shown here" in text and "re-finds" not in text and "differs across architectures" not in text

"""Lab 3 search's answers read their data right: a search below its own baseline, lambdas beaten under their own objective, the front over every study."""
import pytest

from labkit.answers import lab2, lab3
from labkit.results import load_results


def test_a_search_below_its_own_baseline_says_so():
    text = lab3.baseline_text(0.80, [0.5] * 37 + [0.8, 0.79, 0.7], 0.8356, 25_000)
    assert "**The search did not reach its own baseline**" in text and "37 of 40 trials sit at chance" in text
    assert "beats its obvious baseline" in lab3.baseline_text(0.84, [0.84], 0.8356, 25_000)


def test_a_lambda_beaten_under_its_own_objective_is_not_read_as_a_trade_off():
    rows = [{"lambda": 0.001, "accuracy": 0.7998, "weight bits": 5.88}, {"lambda": 0.03, "accuracy": 0.8309,
                                                                         "weight bits": 5.33}]
    text = lab3.lambda_text(rows)
    assert "lambda 0.001's best (0.7998 at 5.88 bits) loses under its own objective to lambda 0.03's" in text
    fine = [{"lambda": 0.001, "accuracy": 0.84, "weight bits": 8.0}, {"lambda": 0.1, "accuracy": 0.80, "weight bits": 2.0}]
    assert "each lambda picks its own point" in lab3.lambda_text(fine)


def test_the_front_over_every_study_and_the_ptq_point_above_the_qat_headline():
    assert [p["bits"] for p in lab3.front_of([{"bits": 2, "accuracy": 0.6}, {"bits": 3, "accuracy": 0.59},
                                              {"bits": 4, "accuracy": 0.8}])] == [2, 4]
    payloads = {n: load_results("lab3", n) for n in lab3.NAMES}
    text = lab3.render(payloads)
    read = lab3.search_vs_baselines(payloads["search_integer"]["numbers"], None)
    below = read["best_search"] < read["best_baseline"]["accuracy"]
    assert ("**The search did not reach its own baseline**" in text) == below
    assert "Each lambda picks one point" not in text
    # points from another study join the multi-objective study's front, and an untrained configuration above
    # several QAT'd ones is said once, naming each
    pareto = {"front": [{"accuracy": 0.80, "bits": 3.9}],
              "qat": [{"bits": 3.7, "accuracy": 0.81}, {"bits": 3.8, "accuracy": 0.805}, {"bits": 6.0, "accuracy": 0.83}]}
    points = [{"accuracy": 0.80, "bits": 3.9, "from": "multi-objective front"},
              {"accuracy": 0.82, "bits": 4.1, "from": "block_fp search"},
              {"accuracy": 0.84, "bits": 5.9, "from": "cost search lambda 0.01"}]
    front = lab3.front_text(pareto, points, fp32=0.84, n_test=25000)
    assert "the front gains points from the other studies: block_fp search 0.8200 at 4.10 bits" in front
    assert front.count("Without any training, block_fp search reaches 0.8200 at 4.10 bits") == 1
    assert "above the QAT'd 3.70-bit (0.8100; +0.40 bits here) and 3.80-bit configurations (0.8050; +0.30" in front
    assert ("cost search lambda 0.01 reaches 0.8400 at 5.90 bits, above the QAT'd 6.00-bit configuration "
            "(0.8300; fewer bits here)") in front


def test_each_format_search_is_read_against_its_own_uniform_point():
    curves = {"integer": [0.5, 0.84], "block_log": [0.826, 0.826, 0.8312], "block_fp": [0.8422, 0.8426],
              "mxint8": [0.8425], "all formats": [0.8, 0.84]}
    text = lab3.against_uniform(curves, 25000)
    assert "gained beyond two standard errors for block_log +0.0052 (+2.2 SE)" in text
    assert "Level with it: block_fp +0.0004 (+0.2 SE)" in text
    assert "mxint8 ran that point alone" in text and "integer" not in text and "all formats" not in text
    assert "for none." in lab3.against_uniform({"block_fp": [0.84, 0.8401]}, 25000)

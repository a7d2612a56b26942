"""Per-seed results: combining them, and differences whose uncertainty includes the training seed."""
import math
import statistics

import pytest

from labkit.readings import seeds
from labkit.readings import stats


def test_combine_keeps_means_and_every_seed():
    per = [{"acc": 0.8, "n": 100, "digest": "a", "rows": [{"w": 4, "ptq": 0.5, "qat": 0.7}], "same": 0.25,
            "sub": {"x": 1.0}},
           {"acc": 0.9, "n": 100, "digest": "b", "rows": [{"w": 4, "ptq": 0.5, "qat": 0.8}], "same": 0.25,
            "sub": {"x": 3.0}}]
    c = seeds.combine(per, [0, 1])
    assert c["seeds"] == [0, 1] and c["n"] == 100 and c["same"] == 0.25 and "same_seeds" not in c
    assert c["acc"] == pytest.approx(0.85) and c["acc_seeds"] == [0.8, 0.9]
    assert c["digest"] == "a" and c["digest_seeds"] == ["a", "b"]
    assert c["rows"][0]["qat_seeds"] == [0.7, 0.8] and c["rows"][0]["ptq"] == 0.5 and c["sub"]["x"] == 2.0
    assert seeds.values(c["rows"][0], "ptq", 2) == [0.5, 0.5]  # equal in every seed: repeated
    assert seeds.values(c, "acc", 2) == [0.8, 0.9] and seeds.count(c) == 2
    assert seeds.count({"acc": 0.8}) == 1  # stored before seeds were kept: one seed
    nan = seeds.combine([{"q": float("nan")}, {"q": 0.6}], [0, 1])
    assert math.isnan(nan["q"]) and nan["q_seeds"][1] == 0.6
    with pytest.raises(ValueError, match="other keys"):
        seeds.combine([{"a": 1.0}, {"b": 1.0}], [0, 1])
    with pytest.raises(ValueError, match="2 results for seeds"):
        seeds.combine(per, [0])
    with pytest.raises(ValueError, match="expected 3"):
        seeds.values(c, "acc", 3)


def test_difference_combines_the_seed_spread_with_the_test_set_error():
    a, b, n = [0.86, 0.87, 0.865], [0.85, 0.852, 0.851], 25_000
    d = stats.difference(a, b, n)
    per = [x - y for x, y in zip(a, b)]
    se_seed = statistics.stdev(per) / math.sqrt(3)  # an independent formula
    pa, pb = statistics.mean(a), statistics.mean(b)
    se_test = math.sqrt(pa * (1 - pa) / n + pb * (1 - pb) / n)
    assert d.mean == pytest.approx(statistics.mean(per), abs=1e-15)
    assert d.se_seed == pytest.approx(se_seed) and d.se_test == pytest.approx(se_test)
    assert d.se == pytest.approx(math.hypot(se_seed, se_test))
    assert d.established and "established" in d.text() and d.seeds == 3


def test_a_sign_change_between_seeds_is_never_established():
    d = stats.difference([0.90, 0.90, 0.80], [0.80, 0.80, 0.81], 10**9)  # large mean, huge n
    assert d.mean > 0.05 and d.sign_changes and not d.established
    assert "sign changes" in d.verdict()


def test_one_seed_or_a_small_gap_is_not_established():
    one = stats.difference([0.9], [0.5], 25_000)  # one seed: judged on the test set alone, and says so
    assert one.established and math.isnan(one.se) and "beyond 2 test-set SE; one training seed" in one.verdict()
    assert one.text() == "+0.4000 ± 0.0037 test-set SE, one seed"
    assert not stats.difference([0.501], [0.5], 25_000).established
    small = stats.difference([0.8601, 0.8605, 0.8603], [0.8600, 0.8601, 0.8600], 25_000)
    assert not small.sign_changes and not small.established
    assert small.verdict() == "not resolvable at 25,000 test reviews"  # 0.0003 is below the test set's 2 SE
    # against a constant (chance), only a's test-set error counts
    const = stats.difference([0.6, 0.61], 0.5, 100)
    assert const.se_test == pytest.approx(math.sqrt(0.605 * 0.395 / 100))
    with pytest.raises(ValueError, match="per-seed values"):
        stats.difference([0.5, 0.6], [0.5], 10)


def test_t_quantiles_are_students():
    from scipy import stats as scipy_stats

    for df in (1, 2, 3, 4, 9, 29, 30, 31, 45, 80, 500):
        assert stats.t95(df) == pytest.approx(scipy_stats.t.ppf(0.975, df), abs=2e-3), df
    assert stats.t95(2.7) == stats.t95(2)  # a fractional df rounds down: the larger quantile
    with pytest.raises(ValueError, match="degrees of freedom"):
        stats.t95(0.5)


def test_three_seeds_need_t_where_their_spread_dominates_and_about_2_where_the_test_set_does():
    # seeds that disagree by far more than the test set's error: 3 seeds, t for 2 degrees of freedom (4.30)
    spread = stats.difference([0.80, 0.86, 0.83], [0.70, 0.70, 0.70], None)
    assert spread.t == pytest.approx(4.3027) and spread.established  # +0.13 over an SE of 0.017
    marginal = stats.difference([0.74, 0.80, 0.77], [0.70, 0.70, 0.70], None)  # +0.07, SE 0.017: 4 SE
    assert not marginal.established and "within 4.30 SE" in marginal.verdict()
    # seeds that agree to the 4th decimal: the SE is the test set's known error, t about 1.96
    tight = stats.difference([0.8731, 0.8726, 0.8726], [0.8603, 0.8600, 0.8600], 25_000)
    assert tight.t == pytest.approx(1.96, abs=0.01) and tight.established


def test_replicates_of_accuracies_count_the_shared_test_set():
    diffs = [-0.004, -0.006, -0.008]  # 2-4 reviews of 500 each
    alone = stats.replicates(diffs)
    with_test = stats.replicates(diffs, accuracies=(0.80, 0.806), n=500)
    assert alone.established and not with_test.established
    assert with_test.se_test == pytest.approx(math.hypot(stats.accuracy_se(0.80, 500), stats.accuracy_se(0.806, 500)))
    assert with_test.verdict() == "not resolvable at 500 test reviews"

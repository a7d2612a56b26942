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
    assert not small.sign_changes and not small.established and "within 2 SE" in small.verdict()
    # against a constant (chance), only a's test-set error counts
    const = stats.difference([0.6, 0.61], 0.5, 100)
    assert const.se_test == pytest.approx(math.sqrt(0.605 * 0.395 / 100))
    with pytest.raises(ValueError, match="per-seed values"):
        stats.difference([0.5, 0.6], [0.5], 10)

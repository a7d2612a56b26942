"""Lab 3 search's answers read their data right: lambdas beaten under their own objective, the Pareto headline
from the front over every study, what QAT did to each front point, the all-formats search's best, and each format
search read against its own uniform point."""
from labkit.answers import lab3_search as lab3
from labkit.readings import lab3_search as read3
from labkit.readings import tables
from labkit.results import load_results


def payloads():
    return {n: load_results("lab3", n) for n in lab3.NAMES}


def test_a_lambda_beaten_under_its_own_objective_is_not_read_as_a_trade_off():
    rows = [{"lambda": 0.001, "accuracy": 0.7998, "weight bits": 5.88}, {"lambda": 0.03, "accuracy": 0.8309,
                                                                         "weight bits": 5.33}]
    text = lab3.lambda_text(rows)
    assert "lambda 0.001's best (0.7998 at 5.88 bits) loses under its own objective to lambda 0.03's" in text
    fine = [{"lambda": 0.001, "accuracy": 0.84, "weight bits": 8.0}, {"lambda": 0.1, "accuracy": 0.80, "weight bits": 2.0}]
    assert "each lambda picks its own point" in lab3.lambda_text(fine)


def test_the_pareto_headline_comes_from_the_front_over_every_study():
    p = payloads()
    text = lab3.render(p)
    num = p["search_pareto"]["numbers"]
    assert tables.front_of([{"bits": 2, "accuracy": 0.6}, {"bits": 3, "accuracy": 0.59},
                          {"bits": 4, "accuracy": 0.8}]) == [{"bits": 2, "accuracy": 0.6}, {"bits": 4, "accuracy": 0.8}]
    # the untrained points of the drawn front, not each study's best, and the uniform points that front dominates
    want = [p for p in num["front_all"] if p["bits"] <= 6 and p["accuracy"] >= num["fp32"] - 0.01]
    first = min(want, key=lambda p: p["bits"])
    assert f"{first['bits']:.2f} average weight bits reach {first['accuracy']:.4f} without any training" in text
    dom = sum(read3.dominated(u, num["front_all"]) for u in num["uniform"])
    assert f"{dom} of the {len(num['uniform'])} uniform-format points are dominated by the front over every" in text
    # every QAT change is stated with the SE of the difference, a fall as a fall
    for q in num["qat"]:
        verb = "raised" if q["accuracy"] > q["ptq"] else "lowered"
        line = f"the {q['bits']:.2f}-bit point {q['ptq']:.4f} -> {q['accuracy']:.4f} ("
        assert line in text or f"the {q['bits']:.2f}-bit point level, {q['ptq']:.4f} -> {q['accuracy']:.4f} (" in text
        if abs(q["accuracy"] - q["ptq"]) > 0.01:
            assert f"QAT {verb} {line}" in text
    assert "Each lambda picks one point" not in text


def test_the_all_formats_best_is_read_as_the_uniform_baseline_it_is():
    p = payloads()
    best = p["search_formats"]["numbers"]["best_so_far"]["all formats"][-1]
    text = lab3.render(p)
    assert f"**The all-formats search's best ({best:.4f} at " in text and " is a uniform baseline**" in text
    assert "keeps wide formats wherever they help" not in text
    assert "None of Task 1's 40 searched trials is all-integer" in text


def test_each_format_search_is_read_against_its_own_uniform_point():
    curves = {"integer": [0.5, 0.84], "block_log": [0.826, 0.826, 0.8312], "block_fp": [0.8422, 0.8426],
              "minifloat_ieee": [0.84, 0.84], "mxint8": [0.8425], "all formats": [0.8, 0.84]}
    num = {"rows": [], "best_so_far": curves}
    read = {r.key: r for r in read3.formats(num, None, 25000, None, None)}
    text = lab3.against_uniform(curves, read)
    assert "the block_log search's best (0.8312) lies +0.0052 above its uniform point (0.8260)" in text
    assert "best of 2 searched trials on one training seed: not established" in text
    assert "the minifloat_ieee search's best is its uniform point (0.8400): none of its 1 searched trials" in text
    assert "mxint8 ran that point alone" in text and "integer" not in text and "all formats" not in text


def test_formats_answer_separates_level_from_below_and_says_why():
    rows = tables.format_rows({"integer": {"best": 0.864, "bits": 8.0, "trials": 25},
                             "binary": {"best": 0.50, "bits": 1.06, "trials": 1}}, 0.865)
    num = {"rows": rows, "best_so_far": {}, "all_formats": {"best": 0.866, "bits": 11.2, "counts": {"integer": 14}}}
    read = {r.key: r for r in read3.formats(num, 0.865, 25000, None, None)}
    text = lab3.formats_answer(rows, 0.865, 25000, num["all_formats"], read)
    assert "integer (0.8640 at 8.0 bits) is level with fp32" in text
    assert "binary (0.5000 at 1.1 bits) is below fp32 (-0.3650, beyond 2 test-set SE)" in text
    assert f"**binary**: {lab3.WHY['binary']}" in text and "**integer**:" not in text


def test_task1_names_the_wide_layers():
    p = payloads()
    p["search_integer"]["numbers"]["widths"] = {"c.key": 16, "a.dense": 8, "b.value": 32}
    text = lab3.render(p)
    assert "of its 3 integer layers, 1 are at 8 bits and 2 wider: `b.value` (32 bits), `c.key` (16 bits)." in text

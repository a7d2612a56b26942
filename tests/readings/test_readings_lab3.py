"""Lab 3's readings: every reading of the committed results is stated by the committed answers; numbers changed so
that a verdict flips flip the rendered sentence; the claims hold; the remeasure finds its pairs in the committed
studies and measures one with the search's own objective."""
import json
import copy

import pytest

from labkit import readings, redraw
from labkit.answers import lab3_formats, lab3_search as lab3
from labkit.labs import lab3_remeasure
from labkit.readings import lab3_formats as rf
from labkit.readings import lab3_search as rs


@pytest.fixture(autouse=True)
def committed_figures(monkeypatch):
    monkeypatch.delenv("LABKIT_FIGURES_DIR", raising=False)


def by_key(notebook, payloads):
    return {r.key: r for r in readings.compute(notebook, payloads)}


@pytest.mark.parametrize("notebook", ["lab3_search", "lab3_formats"])
def test_every_reading_is_stated_by_the_committed_answers_and_stored(notebook):
    payloads = redraw.payloads_of(notebook)
    found = readings.compute(notebook, payloads)
    assert found
    path, _ = redraw.render_answers(notebook)
    text = path.read_text()
    assert [r.key for r in found if r.says not in text] == []
    assert readings.mismatches(found, payloads) == []
    assert [r.key for r in found if not r.holds] == []  # the claims hold


def search_payloads():
    return copy.deepcopy(redraw.payloads_of("lab3_search"))


def test_flip_a_qat_change_and_the_all_formats_best():
    p = search_payloads()
    q = p["search_pareto"]["numbers"]["qat"][0]
    at, before = f"{q['bits']:.2f}", q["ptq"]
    q["accuracy"] = before - 0.05
    assert by_key("lab3_search", p)[f"pareto.qat.{at}"].verdict == "lower"
    assert f"QAT lowered the {at}-bit point {before:.4f} -> {before - 0.05:.4f}" in lab3.render(p)
    q["accuracy"] = before + 0.05
    assert by_key("lab3_search", p)[f"pareto.qat.{at}"].verdict == "higher"
    assert f"QAT raised the {at}-bit point {before:.4f} -> {before + 0.05:.4f}" in lab3.render(p)
    f = p["search_formats"]["numbers"]
    curve = f["best_so_far"]["all formats"]
    start = curve[by_key("lab3_search", p)["all.found"].quantities["queued"] - 1]  # best of the queued uniform points
    curve[-1] = f["all_formats"]["best"] = start + 0.0072
    text = lab3.render(p)
    found = by_key("lab3_search", p)["all.found"]  # a best of its searched trials: a selection, not remeasured
    assert found.verdict == "not established" and found.selection > 1 and "a selection from" in found.says
    assert "is a uniform baseline**" not in text and "lies +0.0072 above the best of the 11 uniform points" in text
    assert "the all-formats search's best is +0.0072" in text and "not established" in text


def test_flip_the_pareto_headline():
    p = search_payloads()
    num = p["search_pareto"]["numbers"]
    fp32 = num["fp32"]
    for pt in num["front_all"]:  # nothing untrained within a point of fp32 any more
        pt["accuracy"] = min(pt["accuracy"], fp32 - 0.02)
    q = min((q for q in num["qat"] if q["bits"] <= rs.MAX_BITS), key=lambda q: q["bits"])
    q["accuracy"] = fp32 - 0.005  # ... but one QAT'd point is
    # a front point picked from every configuration measured, trained once, not remeasured: context, not established
    assert (f"{q['bits']:.2f} average weight bits reach {q['accuracy']:.4f} after QAT, within 1 point of fp32 "
            f"{fp32:.4f} (not established: a selection from") in lab3.render(p)
    assert by_key("lab3_search", p)["pareto.headline"].verdict == "not established"
    for q in num["qat"]:
        q["accuracy"] = min(q["accuracy"], 0.80)
    r = by_key("lab3_search", p)["pareto.headline"]
    assert r.verdict == "fails" and not r.holds
    assert f"**No configuration at <= 6 average weight bits comes within 1 point of fp32 {fp32:.4f}**" in lab3.render(p)


def test_a_qat_point_with_fewer_bits_is_context_beside_the_remeasured_headline():
    p = search_payloads()
    num = p["search_pareto"]["numbers"]
    fp32 = num["fp32"]
    ptq = min((pt for pt in num["front_all"] if pt["bits"] <= rs.MAX_BITS and pt["accuracy"] >= fp32 - rs.WITHIN),
              key=lambda pt: pt["bits"])
    q = min(num["qat"], key=lambda q: q["bits"])
    q.update(bits=ptq["bits"] - 0.5, accuracy=fp32)  # QAT brought fewer bits within a point than any untrained point
    read = by_key("lab3_search", p)
    head = read["pareto.headline"]
    assert head.quantities["bits"] == ptq["bits"] and not head.quantities["trained"]
    assert "pareto.headline_remeasured" in read  # the untrained point's remeasure is still the finding
    assert "0.50 bits fewer (one QAT run on the search's seed, not measured again)" in head.says
    for q in num["qat"]:  # every QAT'd point wider than the untrained one
        q["bits"] = max(q["bits"], ptq["bits"] + 0.5)
    says = by_key("lab3_search", p)["pareto.headline"].says
    assert "bits more" in says and "fewer" not in says


def remeasured(best, base, headline=None):
    pairs = {"format:block_log": {"best": {"label": "b", "bits": 5.7, "accuracy_seeds": best},
                                  "baseline": {"label": "u", "bits": 8.5, "accuracy_seeds": base}}}
    if headline:
        pairs["pareto:headline"] = {"best": {"label": "the 4.58-bit front configuration", "bits": 4.58,
                                             "accuracy_seeds": headline[0]},
                                    "baseline": {"label": "fp32", "bits": 32.0, "accuracy_seeds": headline[1]}}
    return {"lab": "lab3", "name": "search_remeasured", "numbers": {
        "seeds": [1, 2, 3], "search_seed": 0, "n_test": 25_000, "training_seed": "the SFT model's training seed",
        "pairs": pairs, "seconds": 100.0, "sft": []}, "settings": {"profile": "full"},
        "provenance": {"device": "NVIDIA H100 80GB HBM3", "created": "2026-11-28T00:00:00+00:00",
                       "versions": {"torch": "2.11.0"}, "git_commit": "0" * 40}}


def test_flip_a_searched_best_against_its_uniform_point_over_fresh_seeds():
    p = {**search_payloads(), "search_remeasured": None}  # before the retraining: a best of N on one seed
    r = by_key("lab3_search", p)["format.block_log.vs_uniform"]
    assert r.verdict == "not established" and r.source == "search_formats"
    p["search_remeasured"] = remeasured([0.835, 0.836, 0.834], [0.826, 0.825, 0.827],
                                        ([0.833, 0.834, 0.832], [0.842, 0.843, 0.841]))
    read = by_key("lab3_search", p)
    r = read["format.block_log.vs_uniform"]
    assert r.verdict == "higher" and r.source == "search_remeasured" and r.quantities["seeds"] == 3
    text = lab3.render(p)
    assert "**Retrained on 3 fresh SFT models (training seeds 1/2/3; the search used seed 0), the block_log search's " \
           "best stays above block_log's uniform point**: +0.0090" in text
    assert r.expect == ("level",) and not r.holds  # the committed finding (level) is a claim: a gain fails it
    h = read["pareto.headline_remeasured"]
    assert h.verdict == "lower" and "within 1 point of fp32 in every seed" in h.says and h.says in text
    p["search_remeasured"] = remeasured([0.826, 0.827, 0.824], [0.826, 0.825, 0.827])
    r = by_key("lab3_search", p)["format.block_log.vs_uniform"]
    assert r.verdict == "level" and "best is level with block_log's uniform point" in lab3.render(p)


def formats_payloads():
    return copy.deepcopy(redraw.payloads_of("lab3_formats"))


def test_flip_qat_below_ptq_breaks_the_claim_and_the_sentence():
    p = formats_payloads()
    f = p["formats"]["numbers"]["formats"]["integer"]
    f["qat"]["accuracy_seeds"] = [a - 0.03 for a in f["ptq"]["accuracy_seeds"]]
    f["qat"]["accuracy"] = sum(f["qat"]["accuracy_seeds"]) / 3
    r = by_key("lab3_formats", p)["qat.integer"]
    assert r.verdict == "lower" and r.holds  # integer's QAT claims nothing (its committed change is level)
    text = lab3_formats.render(p)
    ptq = f["ptq"]["accuracy"]
    assert f"It lowers it for: integer {ptq:.4f} → {ptq - 0.03:.4f} (-0.0300" in text
    g = p["formats"]["numbers"]["formats"]["log"]  # log's established gain is a claim: lose it and it fails
    g["qat"]["accuracy_seeds"] = [a - 0.03 for a in g["ptq"]["accuracy_seeds"]]
    g["qat"]["accuracy"] = sum(g["qat"]["accuracy_seeds"]) / 3
    assert not by_key("lab3_formats", p)["qat.log"].holds


def test_flip_the_near_lossless_claim():
    p = formats_payloads()
    f = p["formats"]["numbers"]["formats"]["mxint8"]
    f["ptq"]["accuracy_seeds"] = [0.80, 0.80, 0.80]
    f["ptq"]["accuracy"] = 0.80
    r = by_key("lab3_formats", p)["ptq.near_lossless"]
    assert r.verdict == "fails" and not r.holds
    assert "beyond 2 points of fp32 after PTQ at >= 8 bits: mxint8" in lab3_formats.render(p)


def test_dominated_and_best_of_n_by_hand():
    front = [{"bits": 4.0, "accuracy": 0.83}, {"bits": 6.0, "accuracy": 0.84}]
    assert rs.dominated({"bits": 8.0, "accuracy": 0.84}, front)  # more bits, no more accuracy
    assert not rs.dominated({"bits": 6.0, "accuracy": 0.84}, front)  # the point itself
    assert not rs.dominated({"bits": 2.0, "accuracy": 0.5}, front)
    r = rs.best_vs("k", "role", ("best", 0.8450), ("base", 0.8400), 25_000, 15, None, "search_formats")
    # +0.0050 against sqrt(se(0.845)^2 + se(0.84)^2) = 0.003257: 1.5 SE, and not established whatever its size
    assert r.verdict == "not established" and "+0.0050 (+1.5 SE of the difference)" in r.says
    assert abs(r.quantities["se"] - 0.003257) < 1e-5
    assert lab3_remeasure.fresh_seeds({"seed": 0}, 3) == [1, 2, 3]
    assert rf.tied_with_top({"a": [0.85], "b": [0.849], "c": [0.80]}, 25_000) == ("a", ["a", "b"])


def test_the_remeasure_finds_its_pairs_in_the_committed_studies_and_measures_one():
    from labkit import models, recipes
    from labkit.run import profiles
    from labkit.labs.lab3_precision import linear_layers
    from labkit.results import load_results

    s = lab3_remeasure.settings_for("full")
    base = models.load_model(s["model"], seed=0)
    pairs = lab3_remeasure.pairs_of(s, lab3_remeasure.default_storage(s), linear_layers(base),
                                    load_results("lab3", "search_pareto")["numbers"])
    # the pairs the committed remeasure measured, found again from the studies alone
    stored = load_results("lab3", "search_remeasured")["numbers"]["pairs"]
    assert set(pairs) == set(stored) and {"integer", "pareto:headline"} <= set(pairs)
    assert pairs["integer"]["baseline"]["label"] == "fp32"
    assert pairs["integer"]["best"]["stored"] == load_results("lab3", "search_integer")["numbers"]["best"]
    headline = by_key("lab3_search", search_payloads())["pareto.headline"].quantities
    assert pairs["pareto:headline"]["best"]["bits"] == pytest.approx(headline["bits"], abs=1e-9)
    # one configuration measured by the search's own objective, on a small CPU setting with the same layers
    tiny = profiles.lab_settings("lab3_search", "smoke", test_size=16, max_length=16)
    got = lab3_remeasure.measure(tiny, recipes.loaders(tiny), base, pairs["format:block_log"]["best"])
    assert 0 <= got["accuracy"] <= 1 and got["bits"] == pytest.approx(pairs["format:block_log"]["best"]["bits"])


def test_a_configuration_in_two_pairs_keeps_one_value_per_seed(monkeypatch):
    """Task 1's best is read against fp32 and against int16: one configuration object in two pairs, measured
    once per seed, and each side holds exactly one accuracy per fresh seed, in seed order."""
    best = {"formats": {"a": "integer"}, "params": {"w": 8}, "stored": 0.84}
    pairs = {"integer": {"best": best, "baseline": {"formats": {}, "params": {"fp32": 1}, "stored": 0.842}},
             "integer:integer": {"best": best, "baseline": {"formats": {"a": "integer"}, "params": {"w": 16},
                                                            "stored": 0.841}}}
    measured = []

    def measure(s, dl, base, item):
        measured.append((base, json.dumps(item["params"])))
        return {"accuracy": 0.8 + base / 100 + len(item["params"]) * item["params"].get("w", 1) / 1000,
                "bits": 8.0, "seconds": 0.0}

    class DL:
        sizes = {"test": 100}

    monkeypatch.setattr(lab3_remeasure.recipes, "finetuned_model",
                        lambda s, dl, seed: (seed, {"accuracy": 0.84, "sft_digest": "d"}))
    monkeypatch.setattr(lab3_remeasure, "linear_layers", lambda base: [])
    monkeypatch.setattr(lab3_remeasure, "pairs_of", lambda s, storage, layers, pareto: pairs)
    monkeypatch.setattr(lab3_remeasure, "measure", measure)
    monkeypatch.setattr(lab3_remeasure, "load_results", lambda *a, **k: None)
    out = lab3_remeasure.remeasure({"seed": 0, "profile": "smoke"}, storage="journal:x", k=3, dl=DL(), log=lambda *a, **k: None)
    assert out["seeds"] == [1, 2, 3]
    for pair in out["pairs"].values():
        assert len(pair["best"]["accuracy_seeds"]) == len(pair["baseline"]["accuracy_seeds"]) == 3
    assert out["pairs"]["integer"]["best"]["accuracy_seeds"] == pytest.approx([0.818, 0.828, 0.838])
    assert len(measured) == 3 * 3  # three distinct configurations, each once per seed


def test_the_remeasure_without_a_stored_search_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no stored Lab 3 search of profile 'full'.*labkit run lab3_search"):
        lab3_remeasure.settings_for("full")

"""What the lab3_search notebook stores from its finished studies (labkit.labs.lab3_search), on studies of
made-up trials: each format's curve counts its own search's trials only, the cost and Pareto numbers read the
best trials and every measured configuration, and the cost sentence counts the trials that reused one."""
from types import SimpleNamespace

import optuna
import pytest

from labkit.narrate import lab3_search as words
from labkit.labs import lab3_search as results
from labkit.labs.lab3_precision import FORMAT_SPACE, FP32

optuna.logging.set_verbosity(optuna.logging.WARNING)


def trial(acc, bits, formats, cached=False, directions=1):
    attrs = {"accuracy": acc, "weight_bits": bits, "formats": formats, "accuracy_ptq": acc - 0.01}
    if cached:
        attrs["cached"] = True
    values = [acc, bits] if directions == 2 else [acc]
    return optuna.trial.create_trial(params={}, distributions={}, values=values, user_attrs=attrs)


def study(trials, directions=("maximize",)):
    st = optuna.create_study(directions=list(directions))
    for t in trials:
        st.add_trial(t)
    return st


@pytest.fixture
def finished():
    pareto = ("maximize", "minimize")
    studies = {"integer": study([trial(0.70, 8.0, {"integer": 3}), trial(0.90, 20.0, {"integer": 2, FP32: 1}),
                                 trial(0.80, 8.0, {"integer": 3}), trial(0.85, 8.0, {"integer": 3})])}
    for name in FORMAT_SPACE:
        if name != "integer":
            studies[f"format:{name}"] = study([trial(0.6, 6.0, {name: 3}), trial(0.65, 5.0, {name: 3}, cached=True)])
    studies["all"] = study([trial(0.75, 7.0, {"log": 3}), trial(0.8, 6.0, {"log": 2, "integer": 1})])
    studies["cost:0.01"] = study([trial(0.7, 4.0, {"log": 3}), trial(0.72, 5.0, {"integer": 3})])
    studies["pareto"] = study([trial(0.7, 4.0, {"log": 3}, directions=2), trial(0.8, 8.0, {"integer": 3}, directions=2),
                               trial(0.6, 9.0, {"integer": 3}, directions=2)], pareto)
    studies["uniform"] = study([trial(0.78, 8.0, {"integer": 3}, directions=2)], pareto)
    plans = {role: SimpleNamespace(n_trials=3 if role == "integer" else 10) for role in studies}
    return studies, plans


def test_each_format_curve_counts_its_own_searchs_first_trials_with_every_layer_in_it(finished):
    studies, plans = finished
    formats = results.task2(studies, plans, fp32=0.9)
    # Task 1's first 3 trials: the one with an fp32 layer is not the integer search's, the fourth is past its count
    assert formats["best_so_far"]["integer"] == [0.70, 0.80]
    assert formats["best_so_far"]["log"] == [0.6, 0.65]
    assert formats["all_formats"] == {"best": 0.8, "bits": 6.0, "counts": {"log": 2, "integer": 1}}
    assert formats["best_so_far"]["all formats"] == [0.75, 0.8]
    assert formats["rows"][0]["format"] == "integer" and formats["rows"][0]["trials"] == 2


def test_cost_and_pareto_numbers_read_the_best_trials_and_every_configuration_measured(finished):
    studies, _ = finished
    best = results.per_lambda(studies, [0.01])
    assert best == {0.01: {"accuracy": 0.72, "bits": 5.0, "counts": {"integer": 3}}}
    qat = study([trial(0.75, 4.0, {"log": 3}, directions=2)], ("maximize", "minimize"))
    pareto = results.pareto_numbers(studies, qat, [], 0.9, 60.0, 30.0)
    assert [(p["bits"], p["accuracy"]) for p in pareto["front"]] == [(4.0, 0.7), (8.0, 0.8)]
    assert len(pareto["cloud"]) == sum(len(st.trials) for st in studies.values())
    assert pareto["front_all"][-1]["accuracy"] == 0.9  # Task 1's trial with an fp32 layer
    assert pareto["uniform"] == [{"format": "integer", **results.point(studies["uniform"].trials[0])}]
    assert pareto["qat"][0]["ptq"] == pytest.approx(0.74)
    text = words.cost_text(results.search_cost(studies, qat, 60.0, 30.0))
    reused = len(FORMAT_SPACE) - 1
    assert text.startswith("- **Cost of the search.** 1.0 min for the searches and 0.5 min for the QAT here")
    assert f"{reused} of {sum(len(st.trials) for st in studies.values()) + 1} trials reused" in text


def test_the_base_is_numbers_and_narrate_words_them():
    s = {"profile": "quick", "seed": 0, "model": "x", "train_size": 10}
    base = results.base_numbers(s, {"sft_digest": "abcdef0123456789"}, 0.81234, 25000, ["a", "b"], "sqlite:///x.db")
    assert (base["fp32"], base["n_test"], base["layers"]) == (0.81234, 25000, 2)
    assert words.base_text(base).startswith("Base: the SFT model (weights sha256 `abcdef012345`), fp32 accuracy "
                                            "**0.8123** on 25,000 test reviews; 2 Linear layers searched. Studies in ")

"""Lab 3 Task 1: the full-precision choice per layer (left an nn.Linear, 32 bits), the baselines queued as
each accuracy search's first trials (valid points of its space), and the answers and claim that read the
search against the best of them."""
import copy

import optuna
import pytest
import torch

from labkit.run import profiles
from labkit.answers import lab3_search as answers
from labkit.labs import lab3
from labkit.labs import lab3_precision as precision
from labkit.labs.lab3_precision import FORMAT_SPACE, FP32, PrecisionObjective
from labkit.readings import lab3_search as lab3_readings
from labkit.readings import tables
from labkit.quant import QuantLinear, average_bits, quantize
from labkit.results import load_results

optuna.logging.set_verbosity(optuna.logging.WARNING)
LAYERS = ["bert.encoder.layer.0.attention.self.query", "bert.pooler.dense", "classifier"]


@pytest.fixture(scope="module")
def setup(lab3_tiny):
    s, dl, base = lab3_tiny
    return s, dl, copy.deepcopy(base)  # this module's own model, as before the fixture was shared


def test_an_fp32_layer_stays_an_unquantized_linear_counted_at_32_bits(setup):
    _, _, base = setup
    layers = precision.linear_layers(base)
    config = {**precision.uniform(layers, "integer", width=8, frac_width=4), layers[0]: (FP32, {})}
    model = quantize(copy.deepcopy(base), precision.selection(config), inplace=True).model
    kept = model.get_submodule(layers[0])
    assert type(kept) is torch.nn.Linear and not isinstance(kept, QuantLinear)
    assert all(isinstance(model.get_submodule(x), QuantLinear) for x in layers[1:])
    bits = average_bits(model)
    assert bits["per_layer"][layers[0]]["weight_bits"] == 32.0
    everything = quantize(copy.deepcopy(base), precision.selection(precision.uniform(layers, FP32)), inplace=True)
    assert average_bits(everything.model)["weight_bits"] == 32.0 and not everything.changed


def test_fp32_is_sampled_without_parameters_and_measured_at_32_bits(setup):
    s, dl, base = setup
    layers = precision.linear_layers(base)
    trial = optuna.trial.FixedTrial({f"{x}:format": FP32 for x in layers})
    assert precision.sample_config(trial, layers, lab3.INTEGER_FORMATS) == {x: (FP32, {}) for x in layers}
    obj = PrecisionObjective(dl, s, base, formats=lab3.INTEGER_FORMATS)
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(lab3.integer_baselines(layers)["fp32"])
    study.enqueue_trial(lab3.integer_baselines(layers)["int16 frac 8"])
    study.optimize(obj, n_trials=2)
    fp, i16 = study.trials
    assert fp.user_attrs["weight_bits"] == 32.0 and fp.user_attrs["formats"] == {FP32: len(layers)}
    assert i16.user_attrs["formats"] == {"integer": len(layers)} and i16.user_attrs["weight_bits"] == 16.0


def test_check_formats_allows_fp32_beside_a_format_and_names_the_allowed_values():
    assert precision.check_formats(["integer", "fp32"]) == ["integer", "fp32"]
    for bad in (["fp32"], ["int8"], []):
        with pytest.raises(ValueError, match="allowed values are integer, .*fp32"):
            precision.check_formats(bad)


def test_task1_queues_every_uniform_width_and_frac_and_all_fp32_before_its_search():
    s = profiles.lab_settings("lab3_search", "full")
    plans = lab3.phase1_plans(s, LAYERS)
    base = lab3.integer_baselines(LAYERS)
    assert len(base) == 10 and "int8 frac 4" in base and "fp32" in base
    p = plans["integer"]
    assert p.options["formats"] == ["integer", "fp32"] and p.enqueue == list(base.values())
    assert p.n_trials == 10 + s["search_trials"] and not p.queue_only  # search_trials beyond the baselines
    for params in p.enqueue:  # each queued point is a point of the space the study samples
        trial = optuna.trial.FixedTrial(params)
        config = precision.sample_config(trial, LAYERS, p.options["formats"])
        assert precision.params_of(config, p.options["formats"]) == params
        for layer, (name, chosen) in config.items():
            assert name in p.options["formats"]
            assert all(chosen[k] in v for k, v in precision.space_of(name).items())


def test_the_other_accuracy_searches_start_from_their_uniform_points():
    s = profiles.lab_settings("lab3_search", "full")
    plans = lab3.phase1_plans(s, LAYERS)
    for name, space in FORMAT_SPACE.items():
        if name == "integer":
            continue
        p = plans[f"format:{name}"]
        if not space:  # one configuration: one trial, nothing to queue
            assert p.n_trials == 1 and not p.enqueue
            continue
        assert p.n_trials == 1 + s["format_trials"] and len(p.enqueue) == 1
        config = precision.sample_config(optuna.trial.FixedTrial(p.enqueue[0]), LAYERS, [name])
        assert {n for n, _ in config.values()} == {name}
    uniform = lab3.uniform_points(LAYERS)
    assert plans["all"].enqueue == list(uniform.values())
    assert plans["all"].n_trials == len(uniform) + s["search_trials"]
    # the studies whose space or queue did not change keep their names; the changed ones get new ones
    assert plans["integer"].name.startswith("lab3-full-int-fp32-") and plans["all"].name.startswith("lab3-full-all-base-")


def test_task1_numbers_mark_the_baselines_and_the_best_configuration():
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    base = lab3.integer_baselines(LAYERS)
    for params in base.values():
        study.enqueue_trial(params, user_attrs={"enqueued": True})
    acc = {"int8 frac 4": 0.83, "fp32": 0.84}

    def objective(trial):
        config = precision.sample_config(trial, LAYERS, lab3.INTEGER_FORMATS)
        label = next((k for k, v in base.items() if v == trial.params), None)
        a = acc.get(label, 0.5) if label else 0.845 if config[LAYERS[0]][0] == FP32 else 0.5
        bits = sum(32 if n == FP32 else p["width"] for n, p in config.values()) / len(config)
        for k, v in {"accuracy": a, "weight_bits": bits, "n_test": 25_000}.items():
            trial.set_user_attr(k, v)
        return a

    study.optimize(objective, n_trials=len(base) + 6)
    num = lab3.task1_numbers(study, LAYERS, len(base) + 6)
    assert [b["label"] for b in num["baselines"]] == list(base)
    assert sum(t["baseline"] is None for t in num["trials"]) == 6 and len(num["best_so_far"]) == 16
    best = study.best_trial
    assert num["best"] == best.user_attrs["accuracy"] and num["best_bits"] == best.user_attrs["weight_bits"]
    fp = [tables.short(x) for x in LAYERS if best.params[f"{x}:format"] == FP32]
    assert num["fp32_layers"] == fp and set(num["widths"]) == {tables.short(x) for x in LAYERS} - set(fp)


def synthetic(searched: list[float], fp32_layers=("pooler.dense",)) -> dict:
    base = [("int8 frac 2", 0.5, 8.0), ("int8 frac 4", 0.8356, 8.0), ("int8 frac 8", 0.5, 8.0), ("fp32", 0.8442, 32.0)]
    trials = [{"number": i, "accuracy": a, "weight_bits": b, "n_test": 25_000, "enqueued": True, "baseline": label}
              for i, (label, a, b) in enumerate(base)]
    trials += [{"number": len(base) + i, "accuracy": a, "weight_bits": 12.0, "n_test": 25_000, "baseline": None}
               for i, a in enumerate(searched)]
    best = max(trials, key=lambda t: t["accuracy"])
    widths = {x: 8 for x in ("0.attention.self.query", "classifier") if x not in fp32_layers}
    return {"best_so_far": [], "best": best["accuracy"], "best_bits": best["weight_bits"], "widths": widths,
            "fracs": {x: 4 for x in widths}, "fp32_layers": list(fp32_layers), "layers": 3, "fp32": 0.8442,
            "baselines": [{"label": t["baseline"], "number": t["number"], "accuracy": t["accuracy"],
                           "bits": t["weight_bits"]} for t in trials if t["baseline"]], "trials": trials}


def task1_text(num: dict, remeasured: dict | None = None) -> str:
    read = {r.key: r for r in lab3_readings.task1(num, 25_000, remeasured)}
    return answers.task1_answer(num, 0.8442, 25_000, read)


def test_a_search_above_its_best_baseline_is_a_best_of_n_not_a_finding():
    num = synthetic([0.5, 0.5, 0.8, 0.8500])
    text = task1_text(num)
    assert "Best baseline: **fp32 in every layer, 0.8442**" in text
    assert "lies +0.0058 above its best baseline, fp32 in every layer" in text
    assert "the best of 4 searched trials on one training seed: not established" in text
    assert "did not reach" not in text and "2 of 4 searched trials sit at chance" in text
    assert "int8 frac 2, int8 frac 8" in text and "leaves 1 of 3 layers in fp32 at 12.00 average weight bits" in text
    # measured again on fresh seeds: the verdict follows those seeds, by the rule
    pair = {"best": {"accuracy_seeds": [0.850, 0.851, 0.849]}, "baseline": {"accuracy_seeds": [0.830, 0.831, 0.829]}}
    again = {"seeds": [1, 2, 3], "search_seed": 0, "n_test": 25_000, "pairs": {"integer": pair}}
    # the remeasure is the finding, in bold; the one-seed selection above it is context, not bold
    assert "**Retrained on 3 fresh SFT models (training seeds 1/2/3; the search used seed 0), Task 1's best searched " \
           "configuration stays above fp32 in every layer**: +0.0200" in task1_text(num, again)
    assert "**Its best searched trial" not in task1_text(num, again)
    pair["best"]["accuracy_seeds"] = [0.831, 0.829, 0.832]
    assert "configuration is level with fp32 in every layer**: +0.0007" in task1_text(num, again)


def test_a_search_below_its_best_baseline_says_so_and_names_the_baseline():
    every = ("0.attention.self.query", "pooler.dense", "classifier")
    num = {**synthetic([0.5, 0.5, 0.5, 0.8400], fp32_layers=every), "best_bits": 32.0}
    text = task1_text(num)
    assert "**The search did not reach its own baseline**: its best searched trial (0.8400) stays 0.0042" in text
    assert "(1.8 test-set SE) below fp32 in every layer, a point of its space" in text
    assert "not established" not in text.split("against int8")[0]  # nothing above the baseline to establish
    assert "Task 1's best searched configuration is +0.0044" in text and "against int8 frac 4 in every layer" in text
    assert "The best configuration (the baseline fp32, 0.8442) leaves 3 of 3 layers in fp32 at 32.00" in text
    assert "are at 8 bits" not in text  # no integer layer to describe
    no_fp32 = {**num, "baselines": [b for b in num["baselines"] if b["label"] != "fp32"],
               "trials": [t for t in num["trials"] if t["baseline"] != "fp32"]}
    text = task1_text(no_fp32)
    assert "did not reach" not in text and "lies +0.0044 above its best baseline, int8 frac 4" in text


def render(num: dict) -> str:
    """The answers page on the stored payloads with Task 1's numbers replaced by ``num`` (the stored remeasure,
    which is of another best, left out)."""
    payloads = {n: load_results("lab3", n) for n in answers.NAMES if n != "search_remeasured"}
    payloads["search_integer"] = {**payloads["search_integer"], "numbers": num}
    return answers.render(payloads)


def test_the_reading_holds_the_answers_to_the_best_baseline():
    # below its baseline the search "fails"; above it, a best of its trials not measured again is a selection:
    # "not established", never "holds"
    below, above = synthetic([0.5, 0.8100]), synthetic([0.5, 0.8500])
    for num, holds in ((below, False), (above, True)):
        text = render(num)
        found = next(r for r in lab3_readings.task1(num, 25_000, None) if r.key == "task1.found")
        assert found.verdict == ("not established" if holds else "fails") and found.says in text
        assert ("did not reach its own baseline" in text) is (not holds)


def test_a_sampled_trial_that_reuses_a_queued_measurement_is_not_marked_queued(tmp_path):
    from labkit import search
    from labkit.search.cache import cached_or_run

    storage = search.make_storage(f"journal:{tmp_path / 'c.journal'}")
    cache = search.ResultCache(storage)

    def objective(trial):
        trial.suggest_categorical("x", [1])
        return cached_or_run(trial, cache, "same point", lambda: 0.8)

    first = optuna.create_study(study_name="first", storage=storage, direction="maximize")
    first.enqueue_trial({"x": 1}, user_attrs={"enqueued": True})
    first.optimize(objective, n_trials=1)
    second = optuna.create_study(study_name="second", storage=storage, direction="maximize")
    second.optimize(objective, n_trials=1)
    t = second.trials[0]
    assert t.user_attrs["cached"] and "enqueued" not in t.user_attrs and "fixed_params" not in t.system_attrs

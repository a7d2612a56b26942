"""Lab 3's mixed-precision search: the sampled per-layer config is what the model holds, the objectives
are computed from the model actually built, measurements are shared through the cache, and a
multi-objective study resumes."""
import copy

import optuna
import pytest
import torch

from labkit import search
from labkit.quant import QuantLinear, average_bits, make_format, quantize
from labkit.labs import lab3_precision as precision
from labkit.labs.lab3_precision import FORMAT_SPACE, PrecisionObjective

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def setup(lab3_tiny):
    s, dl, base = lab3_tiny
    return s, dl, copy.deepcopy(base)  # this module's own model, as before the fixture was shared


def sampled_configs(layers, formats, n, seed=0):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(n):
        yield precision.sample_config(study.ask(), layers, formats)


def test_every_sampled_config_is_what_the_model_holds(setup):
    _, _, base = setup
    layers = precision.linear_layers(base)
    seen = set()
    for config in sampled_configs(layers, list(FORMAT_SPACE), 30):
        model = quantize(copy.deepcopy(base), precision.selection(config), inplace=True).model
        for layer, (name, params) in config.items():
            q = model.get_submodule(layer)
            assert isinstance(q, QuantLinear)
            fmt = make_format(name, **params)
            assert q.config.weight == fmt and q.config.data_in == fmt  # format and widths read back
            assert (q.config.bias is None) == (name in ("binary", "binary_scaling", "binary_residual_sign"))
            for key, choices in FORMAT_SPACE[name].items():
                assert getattr(fmt, key) in choices or key == "exponent_width"
            seen.add(name)
        assert set(dict(model.named_modules())) == set(dict(base.named_modules())) | {
            f"{layer}.{q}" for layer in layers for q in ("q_data_in", "q_weight", "q_bias")
            if getattr(model.get_submodule(layer), q) is not None}
    assert seen == set(FORMAT_SPACE)  # 30 random configs of 4 layers cover every format


def test_an_exponent_wider_than_the_width_allows_is_cut_not_pruned():
    study = optuna.create_study()
    study.enqueue_trial({"l:format": "minifloat_denorm", "l:minifloat_denorm.width": 4,
                         "l:minifloat_denorm.exponent_width": 4})
    name, params = precision.sample_layer(study.ask(), "l", list(FORMAT_SPACE))
    assert (name, params["width"], params["exponent_width"]) == ("minifloat_denorm", 4, 2)
    make_format(name, **params)  # valid


def test_objectives_are_computed_from_the_model_actually_built(setup, tmp_path):
    s, dl, base = setup
    layers = precision.linear_layers(base)
    storage = search.make_storage(f"journal:{tmp_path / 'p.journal'}")
    results = {}
    for objective, directions in (("cost", ["maximize"]), ("pareto", ["maximize", "minimize"])):
        obj = PrecisionObjective(dl, s, base, formats=["integer", "block_fp", "binary"], objective=objective,
                                 lam=0.01)
        obj.cache = search.ResultCache(storage)
        study = optuna.create_study(study_name=objective, storage=storage, directions=directions,
                                    sampler=optuna.samplers.RandomSampler(seed=1))
        study.optimize(obj, n_trials=3)
        results[objective] = study
        for t in study.trials:
            config = {layer: precision.sample_layer(optuna.trial.FixedTrial(t.params), layer, obj.formats)
                      for layer in layers}
            model = quantize(copy.deepcopy(base), precision.selection(config), inplace=True).model
            bits = average_bits(model)["weight_bits"]
            assert t.user_attrs["weight_bits"] == pytest.approx(bits, rel=1e-12)
            from labkit.training import train

            acc = train.evaluate(model, dl.test, device="cpu", progress=False)["accuracy"]
            assert t.user_attrs["accuracy"] == acc
            expected = [acc - 0.01 * bits] if objective == "cost" else [acc, bits]
            assert t.values == pytest.approx(expected, rel=1e-12)
    # the same three configurations (same sampler seed): the Pareto study measured nothing again
    assert all(t.user_attrs.get("cached") for t in results["pareto"].trials)


def test_a_multi_objective_study_resumes(setup, tmp_path, monkeypatch):
    s, dl, base = setup
    monkeypatch.setattr(precision, "_BASE", {})
    url = f"journal:{tmp_path / 'mo.journal'}"
    plan = dict(name="mo", objective="in-process", settings={}, sampler="tpe", seed=0,
                directions=["maximize", "minimize"])

    def objective():
        return PrecisionObjective(dl, s, base, formats=list(FORMAT_SPACE), objective="pareto")

    first = search.run_studies([search.StudyPlan(**plan, n_trials=3)], storage=url, progress=False,
                               objectives={"mo": objective()})["mo"]
    before = {t.number: t.values for t in first.trials}
    again = search.run_studies([search.StudyPlan(**plan, n_trials=5)], storage=url, progress=False,
                               objectives={"mo": objective()})["mo"]
    done = [t for t in again.trials if t.state.name == "COMPLETE"]
    assert len(done) == 5 and all(again.trials[n].values == v for n, v in before.items())
    assert again.best_trials  # a Pareto front


def test_ptq_trial_shares_the_base_weights_and_leaves_them_alone(setup):
    """A PTQ trial's model shares the base's non-quantized tensors (no deep copy of the embeddings) and
    copies the Linears it quantizes; the base model is not changed by the trial."""
    s, dl, base = setup
    before = {k: v.clone() for k, v in base.state_dict().items()}
    copied = precision._copy(base, share=True)
    assert copied.bert.embeddings.word_embeddings.weight is base.bert.embeddings.word_embeddings.weight
    obj = PrecisionObjective(dl, s, base, formats=["block_fp"])
    config = precision.uniform(obj.layers, "block_fp", width=4, exponent_width=8, block_size=16)

    class T:
        user_attrs = {}

        def set_user_attr(self, k, v):
            self.user_attrs[k] = v
    obj._measure(T(), config)
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    assert not any(isinstance(m, QuantLinear) for m in base.modules())
    deep = precision._copy(base, share=False)  # QAT trains its copy: nothing shared
    assert deep.bert.embeddings.word_embeddings.weight is not base.bert.embeddings.word_embeddings.weight

"""Lab 2's exercises beyond the generic self-test: the notebook's solutions pass, the objective's oracle is labkit's
own trial code (its steps patched in only for the call), and the search-space cases read a trial as a real study
draws it."""
from __future__ import annotations

import copy
import math
from pathlib import Path

import optuna
import pytest

from labkit.exercises import evaluate, get
from labkit.exercises import lab2 as ex2
from labkit.exercises.editions import parse
from labkit.labs import lab2_objectives, lab2_space
from labkit.sandbox import harness
from labkit.search import curves

SOURCE = Path(__file__).resolve().parents[2] / "notebooks" / "src" / "lab2_search.py"


def _solutions() -> dict:
    ns = {"copy": copy, "math": math, "optuna": optuna}
    for cell in parse(SOURCE.read_text()).cells:
        if "exercise" in cell.metadata.get("tags", []):
            exec(cell.source, ns)
    return ns


@pytest.mark.parametrize("exercise_id, name", [("lab2.search_space", "sample_architecture"),
                                               ("lab2.best_so_far", "best_so_far"),
                                               ("lab2.compression_objective", "compression_objective")])
def test_the_notebooks_solution_passes_every_case(exercise_id, name):
    result = evaluate(exercise_id, _solutions()[name], hidden_seed=3)
    assert result.ok and result.hidden_total > 0, result.summary()


def test_a_fixed_trial_of_a_studys_params_gives_the_architecture_the_study_drew():
    drawn = []
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda t: drawn.append(lab2_space.sample_architecture(t)) or 0.0, n_trials=5)
    solution = _solutions()["sample_architecture"]
    for trial, arch in zip(study.trials, drawn):
        assert solution(optuna.trial.FixedTrial(trial.params)) == arch


def test_the_objective_oracle_is_labkits_trial_code_and_puts_it_back():
    before = {k: getattr(lab2_objectives, k) for k in ("build_model", "compress", "train", "count_parameters")}
    case = next(c for c in get("lab2.compression_objective").cases() if c.args[1] == "compress+train")
    got = harness.trace_objective(ex2.compression_objective.reference, *case.args, case.kwargs["accuracies"])
    assert got["recorded"]["accuracy_control"] == case.kwargs["accuracies"][ex2.CONTROL]
    assert "post_train(built+trained)" in got["calls"]  # the control, as NASObjective._run trains it

    def boom(model):
        raise RuntimeError("a step failed")

    with pytest.raises(RuntimeError):
        ex2.compression_objective.reference({}, "compress", lambda a: harness.StandIn(["built"]), boom, boom, boom, boom,
                                  lambda k, v: None)
    assert {k: getattr(lab2_objectives, k) for k in before} == before


def test_trial_values_feed_best_so_far_as_labkit_reads_a_study():
    study = ex2.study_of([0.3, None, float("nan"), 0.7, 0.5])
    assert ex2.trial_values(study) == [0.3, None, None, 0.7, 0.5]
    assert _solutions()["best_so_far"](ex2.trial_values(study), 2) == curves.best_so_far(study, limit=2) == [0.3, 0.7]

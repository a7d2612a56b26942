"""Lab 2's searches read back through the student's own functions (the exercises' ``sample_architecture``,
``best_so_far`` and ``compression_objective``): each must agree with what the workers recorded, else an
AssertionError says where they part."""
from __future__ import annotations

from typing import Callable

import optuna

from ..labs import lab2
from ..labs.lab2_space import build_model
from ..models import count_parameters
from ..sandbox.harness import trace_objective
from .lab2 import accuracies_of, trial_values


def _completed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number) if t.state.name == "COMPLETE"]


def _arch(sample: Callable, params: dict) -> dict:
    # a Grid trial's parameters keep every Linear: made explicit for a sampler that also chooses Identity
    return sample(optuna.trial.FixedTrial(lab2.full_params(params)))


def drawn(task1, sample: Callable) -> list[dict]:
    """Table rows: each Task 1 study's first completed trial as ``sample`` draws it."""
    rows = []
    for name, st in task1.studies.items():
        first = _completed(st)[0]
        arch = _arch(sample, first.params)
        rows.append({"study": name, "trial": first.number, **arch["config"],
                     "identity": sum(v == "identity" for v in arch["linears"].values()), "accuracy": first.value})
    return rows


def rebuilt_best(task1, sample: Callable) -> None:
    """Task 1's best trial, rebuilt from ``sample``, must have the parameter count the trial recorded."""
    assert count_parameters(build_model(_arch(sample, task1.best.params))) == task1.best.user_attrs["parameters"], \
        "the best trial's architecture, rebuilt from your sampler, has another parameter count than the trial recorded"


def sampler_curves(task1, best_so_far: Callable, s: dict) -> list[dict]:
    """Table rows: each Task 1 study's curve by ``best_so_far``, which must give labkit's curves."""
    mine = {sampler: [best_so_far(trial_values(st), s["trials"]) for st in sts]
            for sampler, sts in lab2.by_sampler(task1.studies).items()}
    assert mine == task1.curves, "your best_so_far gives other curves than labkit's on these studies"
    return [{"sampler": sampler, "seed": seed, "best so far": ", ".join(f"{v:.4f}" for v in c)}
            for sampler, cs in mine.items() for seed, c in zip(s["seeds"], cs)]


def objectives(task2, sample: Callable, objective: Callable, best_so_far: Callable, s: dict) -> list[dict]:
    """Table rows: each search's start (else its first completed trial: any trial replays the same way) replayed
    through ``objective`` with stand-in steps, which must return the trial's value and record what it recorded;
    and ``best_so_far`` must give each search's curve."""
    rows = []
    for label, st in task2.by_label.items():
        done, start = _completed(st), task2.starts[label]
        first = next((t for t in done if start and t.number == start["number"]), done[0])
        replay = trace_objective(objective, _arch(sample, first.params), lab2.MODES[label],
                                 accuracies_of(first.user_attrs))
        assert replay["value"] == first.value, f"{label}: your objective returns {replay['value']}, the trial {first.value}"
        assert replay["recorded"] == {k: v for k, v in first.user_attrs.items() if k.startswith("accuracy_")}, \
            f"{label}: your objective records {replay['recorded']}"
        rows.append({"objective": label, "trial": first.number, "value": replay["value"],
                     "steps": " -> ".join(c.split("(")[0] for c in replay["calls"])})
    mine = {label: best_so_far(trial_values(st), s["compression_trials"]) for label, st in task2.by_label.items()}
    assert mine == task2.curves, "your best_so_far gives other curves than labkit's on these studies"
    return rows

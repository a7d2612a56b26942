"""Lab 2's studies as plans: Task 1 (each sampler x each seed) and Task 2 (three compression-aware TPE
searches that start from Task 1's best architecture), run by the shared workers.

The notebook and ``labkit search worker lab2`` build the same plans from the same settings, so workers
started by hand (here or on other machines) and the notebook fill the same studies.
"""
from __future__ import annotations

import optuna

from .. import settings as _paths
from ..quant import fixed_point
from ..search.plan import StudyPlan, study_settings, study_tag
from ..search.storage import default_url
from ..records.lab2_search import grid_space, restrict
from .lab2_space import LINEAR_CHOICES, SQUARE_LINEARS

SAMPLERS = ("random", "grid", "tpe")
MODES = {"no compression": "none", "compressed": "compress", "compressed + post-training": "compress+train"}
# Task 2's workers start the longest trials first (median 36, 46 and 190 s per mode on an H100), so the last
# post-training trials do not start late; measured on an H100 the gain is small (376 s against 391 s with even shares,
# one run each: benchmarks/search/task2_wall.json), as long trials side by side slow each other
PRIORITY = {"none": 0, "compress": 1, "compress+train": 2}


def compression_configs(s: dict) -> tuple[dict, dict]:
    quant = fixed_point(s["quant_width"])
    prune = {"weight": {"sparsity": s["prune_sparsity"], "method": "l1-norm", "scope": "local"},
             "activation": {"sparsity": s["prune_sparsity"], "method": "l1-norm", "scope": "local"}}
    return quant, prune


def _best_dir(s: dict, label: str) -> str:
    return str(_paths.runs_dir() / "lab2" / f"{s['profile']}-{label}-{study_tag(s)}")


def task1_plans(s: dict) -> list[StudyPlan]:
    """One study per sampler and seed, ``s["trials"]`` trials each."""
    restrict(s["space"])  # a bad space fails here, not in every worker (the plans store it as given)
    tag, plans = study_tag(s), []
    for sampler in SAMPLERS:
        grid = sampler == "grid"
        for seed in s["seeds"]:
            plans.append(StudyPlan(
                name=f"lab2-{s['profile']}-{sampler}-s{seed}-{tag}", objective="lab2", settings=study_settings(s),
                options={"identity_choices": not grid, "space": s["space"],
                         "best_dir": _best_dir(s, f"{sampler}-s{seed}")},
                sampler=sampler, seed=seed, n_trials=s["trials"], grid=grid_space(s["space"]) if grid else None))
    return plans


def full_params(params: dict) -> dict:
    """Parameters with every per-layer choice explicit (a Grid trial keeps all Linear layers), so the
    architecture can be queued in a search that also chooses Identity layers."""
    out = dict(params)
    for i in range(params["num_hidden_layers"]):
        for name in SQUARE_LINEARS:
            out.setdefault(f"layer{i}.{name}", LINEAR_CHOICES[0])
    return out


def by_sampler(task1: dict[str, optuna.Study]) -> dict[str, list[optuna.Study]]:
    """Task 1's studies grouped by sampler (seed order)."""
    return {sampler: [st for name, st in task1.items() if f"-{sampler}-s" in name] for sampler in SAMPLERS}


def by_objective(task2: dict[str, optuna.Study]) -> dict[str, optuna.Study]:
    """Task 2's studies by objective label (``MODES``)."""
    return {label: next(st for name, st in task2.items() if f"-cas-{mode}-" in name) for label, mode in MODES.items()}


def best_trial(studies: dict[str, optuna.Study]) -> tuple[str, optuna.trial.FrozenTrial]:
    name = max(studies, key=lambda n: studies[n].best_value)
    return name, studies[name].best_trial


def task2_plans(s: dict, start: dict) -> list[StudyPlan]:
    """Three TPE searches (one per objective) from the same first trial, ``start`` (Task 1's best)."""
    restrict(s["space"])  # as in task1_plans
    quant, prune = compression_configs(s)
    tag, seed = study_tag(s), s["seeds"][0]
    return [StudyPlan(name=f"lab2-{s['profile']}-cas-{mode}-{tag}", objective="lab2", settings=study_settings(s),
                      options={"mode": mode, "quant": quant, "prune": prune, "space": s["space"],
                               "best_dir": _best_dir(s, mode)},
                      sampler="tpe", seed=seed, n_trials=s["compression_trials"], enqueue=[full_params(start)],
                      priority=PRIORITY[mode])
            for mode in MODES.values()]


def run_all(s: dict, storage: str | None = None, progress=True, workers=None, first_worker: int = 0):
    """Task 1, then Task 2 from Task 1's best: ``(task1 studies, task2 studies, (best study, best trial))``."""
    from ..search.run import run_studies

    workers = s["workers"] if workers is None else workers  # None: the settings' own ("auto" or a count)
    url = storage or s["storage"] or default_storage(s)
    task1 = run_studies(task1_plans(s), storage=url, workers=workers, progress=progress, desc="Lab 2 task 1",
                        mps=s["mps"], first_worker=first_worker)
    best = best_trial(task1)
    task2 = run_studies(task2_plans(s, best[1].params), storage=url, workers=workers, progress=progress,
                        desc="Lab 2 task 2", mps=s["mps"], first_worker=first_worker)
    return task1, task2, best


def default_storage(s: dict) -> str:
    return default_url("lab2")

"""Lab 2's two tasks as the notebook runs them: the studies (timed), what is read from them (best-so-far curves,
bands over seeds, the best trial, within-trial changes) and the numbers stored as ``samplers.json`` and
``compression_aware.json``."""
from __future__ import annotations

import time
from dataclasses import dataclass

import optuna

from .. import search
from ..readings.lab2_search import start_of
from ..readings.tables import post_vs_control, sampler_rows, within_trial
from . import lab2


@dataclass
class Task1:
    studies: dict[str, optuna.Study]
    seconds: float
    curves: dict[str, list[list[float]]]  # sampler -> one best-so-far curve per seed
    bands: dict[str, dict]                # every sampler cut to the shortest search: equal budget
    done: dict[str, int]                  # study -> completed trials
    trials_from: dict                     # search.trial_provenance
    best_study: str
    best: optuna.trial.FrozenTrial


@dataclass
class Task2:
    studies: dict[str, optuna.Study]
    seconds: float
    by_label: dict[str, optuna.Study]     # objective label (lab2.MODES) -> its study
    trials: dict[str, list[dict]]         # label -> its first completed trials, as stored
    curves: dict[str, list[float]]
    best: dict[str, float]
    done: dict[str, int]
    trials_from: dict
    effects: dict[str, dict]              # within-trial changes (within_trial)
    post_control: dict | None             # post_vs_control
    starts: dict[str, dict | None]        # label -> its start trial (Task 1's best), if it completed


def _completed(study: optuna.Study) -> list[dict]:
    return [{"number": t.number, "value": t.value, "params": t.params, **t.user_attrs}
            for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]


def run_task1(s: dict, storage: str, workers) -> Task1:
    """Task 1's studies (each sampler x each seed), run or resumed, and what the notebook reads from them."""
    start = time.time()
    studies = search.run_studies(lab2.task1_plans(s), storage=storage, workers=workers, desc="Lab 2 task 1",
                                 mps=s["mps"], report_only=s["report_only"])
    seconds = time.time() - start
    curves = {sampler: [search.best_so_far(st, limit=s["trials"]) for st in sts]
              for sampler, sts in lab2.by_sampler(studies).items()}
    done = {name: sum(t.state.name == "COMPLETE" for t in st.trials) for name, st in studies.items()}
    best_study, best = lab2.best_trial(studies)
    return Task1(studies, seconds, curves, search.bands(curves), done, search.trial_provenance(studies.values()),
                 best_study, best)


def run_task2(s: dict, storage: str, workers, start: dict) -> Task2:
    """Task 2's three compression-aware searches from ``start`` (Task 1's best parameters), run or resumed, and
    what the notebook reads from them."""
    began = time.time()
    studies = search.run_studies(lab2.task2_plans(s, start), storage=storage, workers=workers,
                                 desc="Lab 2 task 2", mps=s["mps"], report_only=s["report_only"])
    seconds = time.time() - began
    comp = lab2.by_objective(studies)
    trials = {label: _completed(st)[: s["compression_trials"]] for label, st in comp.items()}
    curves = {label: search.best_so_far(st, limit=s["compression_trials"]) for label, st in comp.items()}
    post = trials["compressed + post-training"]
    effects = {"compression, no post-training": within_trial(trials["compressed"], "accuracy_compressed"),
               "post-training after compression": within_trial(post, "accuracy_post_trained",
                                                                       "accuracy_compressed")}
    # each post-training trial also trained its uncompressed model as long (its equal-training control)
    post_control = post_vs_control(post)
    if post_control is not None:
        effects["post-training against its control"] = within_trial(post, "accuracy_post_trained",
                                                                            "accuracy_control")
    # the start is Task 1's best, queued as trial 0 (or run again under another number after a failure): not
    # necessarily the first completed trial
    starts = {label: start_of(ts) for label, ts in trials.items()}
    return Task2(studies, seconds, comp, trials, curves, {label: max(c) for label, c in curves.items()},
                 {label: len(c) for label, c in curves.items()}, search.trial_provenance(comp.values()), effects,
                 post_control, starts)


def run_facts(storage: str, s: dict, task1: Task1, task2: Task2) -> dict:
    """What the run did, as ``answers.lab2_search.run_header`` and ``run_cost`` word it: where the studies are,
    how their trials ran (the trials' own records: worker processes, hosts, devices; not this process's count),
    how long each task took and how many trials reused a cached result."""
    every = [*task1.studies.values(), *task2.studies.values()]
    trials = [t for st in every for t in st.trials]
    return {"storage": search.storage.shown_url(storage), "tag": lab2.study_tag(s),
            "provenance": search.trial_provenance(every), "seconds": {"task1": task1.seconds, "task2": task2.seconds},
            "trial_seconds_mean": {"task1": task1.trials_from.get("trial_seconds_mean"),
                                   "task2": task2.trials_from.get("trial_seconds_mean")},
            "cached": sum(bool(t.user_attrs.get("cached")) for t in trials), "trials": len(trials)}


def samplers_numbers(task1: Task1, s: dict) -> dict:
    """The numbers of ``samplers.json``."""
    best = task1.best
    return {"bands": task1.bands, "curves": task1.curves, "rows": sampler_rows(task1.bands),
            "search_seconds": task1.seconds, "completed": task1.done, "trials_from": task1.trials_from,
            "report_only": s["report_only"],
            "best": {"study": task1.best_study, "trial": best.number, "value": best.value, "params": best.params},
            "trials": {name: _completed(st) for name, st in task1.studies.items()}}


def compression_numbers(task1: Task1, task2: Task2, s: dict) -> dict:
    """The numbers of ``compression_aware.json``."""
    quant, prune = lab2.compression_configs(s)
    return {"best_so_far": task2.curves, "best": task2.best, "within_trial": task2.effects, "trials": task2.trials,
            "start": {"study": task1.best_study, "trial": task1.best.number, "value": task1.best.value},
            "search_seconds": task2.seconds, "quant": quant, "prune": prune, "completed": task2.done,
            "trials_from": task2.trials_from, "post_vs_control": task2.post_control,
            "report_only": s["report_only"]}

"""What a worker needs to join a study: a JSON-able plan, stored in the study itself.

A plan names its objective by a notebook's search (``"lab2"``: its record's ``Search.objective``,
``labkit.records``) or as an importable ``"module:function"`` factory, so any process on any machine can rebuild the objective from the plan alone: that is what lets
``labkit search worker`` join a study it did not create.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from .. import records
from .samplers import SAMPLERS

# Modules that moved: a plan stored in a study keeps the "module:function" it was written with, so an old
# module path resolves to where that module lives now.
MOVED = {"labkit.search.lab2": "labkit.labs.lab2", "labkit.search.space": "labkit.labs.lab2_space",
         "labkit.search.objectives": "labkit.labs.lab2_objectives", "labkit.search.lab3": "labkit.labs.lab3",
         "labkit.search.precision": "labkit.labs.lab3_precision"}
IN_PROCESS = "in-process"
# Settings that say how a study is run, not what it computes: left out when plans are compared.
RUN_ONLY = ("storage", "workers", "mps", "report_only")  # a callable handed to run_study directly: runs in that process only


@dataclass
class StudyPlan:
    """One Optuna study to run to ``n_trials`` finished trials.

    ``sampler``/``seed``: each worker derives its own sampler seed from ``seed``. ``grid``: the finite
    space of the grid sampler (its first ``n_trials`` points in a seeded order are queued once, so
    concurrent workers never run a point twice). ``enqueue``: parameter sets to run first (e.g. the best
    architecture of an earlier search). ``directions``: one per objective value (several: a multi-objective
    study, e.g. ``["maximize", "minimize"]`` for accuracy and bits). ``priority``: how a worker running several
    studies picks the next trial: a higher priority first (give studies with longer trials a higher one: longest
    first ends the search sooner); equal priorities share the workers evenly. Not part of the study's identity.
    """
    name: str
    objective: str
    settings: dict
    options: dict = field(default_factory=dict)
    sampler: str = "tpe"
    seed: int = 0
    n_trials: int = 20
    grid: dict | None = None
    enqueue: list = field(default_factory=list)
    directions: list = field(default_factory=lambda: ["maximize"])
    priority: int = 0

    def __post_init__(self):
        if not isinstance(self.n_trials, int) or isinstance(self.n_trials, bool) or self.n_trials < 1:
            raise ValueError(f"study {self.name!r}: n_trials must be an integer >= 1, got {self.n_trials!r}")
        # workers derive their sampler seeds from it (numpy SeedSequence: non-negative integers only)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"study {self.name!r}: seed must be an integer >= 0, got {self.seed!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"study {self.name!r}: sampler={self.sampler!r}; allowed values are "
                             f"{', '.join(map(repr, SAMPLERS))}")
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise ValueError(f"study {self.name!r}: priority must be an integer, got {self.priority!r}")
        bad = [d for d in self.directions if d not in ("maximize", "minimize")]
        if not self.directions or bad:
            raise ValueError(f"study {self.name!r}: directions={self.directions!r}; each must be 'maximize' or "
                             "'minimize'")
        if self.sampler == "grid" and not self.grid:
            raise ValueError(f"study {self.name!r}: the grid sampler needs a finite search space (grid=...)")
        if self.objective != IN_PROCESS:
            resolve_objective(self.objective)  # fail here, not in a worker process

    @property
    def queue_only(self) -> bool:
        """Grid plans, and plans that queue all their trials, run only their queued points (a worker that
        finds the queue empty never samples a point of its own)."""
        return self.sampler == "grid" or len(self.enqueue) >= self.n_trials

    def identity(self) -> dict:
        """What makes two plans the same study: everything but ``n_trials`` and how it is run."""
        out = json.loads(self.to_json())
        out.pop("n_trials")
        out.pop("priority")
        out["settings"] = {k: v for k, v in out["settings"].items() if k not in RUN_ONLY}
        return out

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> "StudyPlan":
        return cls(**json.loads(text))


def study_settings(s: dict) -> dict:
    """The settings a lab's study stores in its plan (how it is run, e.g. the worker count, may change)."""
    return {k: v for k, v in s.items() if k not in RUN_ONLY}


def study_tag(s: dict) -> str:
    """A digest of a lab's settings for its study names: changed settings start new studies, the same
    ones resume."""
    return hashlib.sha256(json.dumps(study_settings(s), sort_keys=True).encode()).hexdigest()[:8]


def objectives() -> dict[str, str]:
    """Objective factories by name: each notebook search's (``labkit.records``)."""
    return {name: s.objective for name, s in records.searches().items()}


def resolve_objective(name: str):
    if name == IN_PROCESS:
        raise ValueError("an in-process objective cannot be rebuilt in another process; name an importable "
                         "factory ('module:function') to run it with workers > 1")
    known = objectives()
    target = known.get(name, name)
    if ":" not in target:
        raise KeyError(f"objective {name!r} unknown; allowed: {', '.join(known)} or 'module:function'")
    module, func = target.split(":", 1)
    try:
        return records.resolve(f"{MOVED.get(module, module)}:{func}")
    except ValueError as err:
        raise KeyError(f"objective {name!r}: cannot import {target!r} ({err})") from err


def prepare(plans: list[StudyPlan]) -> None:
    """Run each objective factory's ``prepare(settings)`` (if it has one) once per distinct settings, in
    this process, before workers start (e.g. tokenise the data once instead of in every worker)."""
    done = set()
    for plan in plans:
        if plan.objective == IN_PROCESS:
            continue
        factory = resolve_objective(plan.objective)
        key = (plan.objective, json.dumps(plan.settings, sort_keys=True, default=str))
        if hasattr(factory, "prepare") and key not in done:
            factory.prepare(plan.settings)
            done.add(key)


def build_objective(plan: StudyPlan):
    return resolve_objective(plan.objective)(plan.settings, **plan.options)

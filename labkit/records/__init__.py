"""One record per lab notebook: everything the tools know of it, declared once in ``records/<key>.py``.

A record names its notebook (``notebooks/src/<key>.py``), the folder its results go to, its settings per
profile (with ranges and named choices for overrides), the results and figures it stores, its answers file,
its regeneration steps and, for a search, its objective and worker memory. Profiles, overrides, redraw,
claims, regeneration, the search registry, the command line and the front end iterate the records; the key
also names the notebook's modules: ``labkit.plots.<key>``, ``labkit.answers.<key>``, ``labkit.readings.<key>``.

A new lab is a notebook source, a record module here (``RECORD = Notebook(...)``), its plots, answers and
readings modules and its tests: nothing else is edited (CONTRIBUTING.md).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping

PROFILES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class Settings:
    """A notebook's settings. ``name`` is what stored settings call them (``S["lab"]``, and so the identity of
    the Optuna studies and per-seed runs built from them): two notebooks of one lab may share one.
    ``profiles``: profile -> the notebook's own keys (a value may be ``{"cpu": ..., "cuda": ...}``: per measured
    device). ``imdb``: also the common IMDb keys (``records._common``). ``ranges``: key -> (low, low included,
    high, high included), None unbounded, applied to a number, each element of a list, each per-device value.
    ``choices``: key -> "module:function" raising on a value that is not one of its named choices.
    ``parsers``: key -> "module:function" that checks a value whole (no type taken from the profiles) and
    returns it normalised."""
    name: str
    profiles: Mapping[str, Mapping]
    imdb: bool = True
    ranges: Mapping[str, tuple] = field(default_factory=dict)
    choices: Mapping[str, str] = field(default_factory=dict)
    parsers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        missing = set(PROFILES) - set(self.profiles)
        if missing:
            raise ValueError(f"settings {self.name!r}: no values for profile(s) {sorted(missing)}; allowed "
                             f"profiles: {', '.join(PROFILES)}")


@dataclass(frozen=True)
class Search:
    """A notebook's Optuna searches. ``name``: their journal (``runs/optuna/<name>.journal``), and what
    ``labkit search worker`` and ``labkit dashboard`` take; ``objective``: "module:function" factory
    ``(settings, **options) -> objective(trial)`` (stored plans name it by ``name``); ``run``: "module:function"
    ``(settings, storage, progress, workers, first_worker)`` running all of them; ``worker_gib``: GPU memory one
    trial process needs (how many share a card)."""
    name: str
    objective: str
    run: str
    worker_gib: float


@dataclass(frozen=True)
class Step:
    """One step of a full-profile regeneration (``labkit.maintain.regenerate``). ``notebook``: its key, or
    a benchmark's name with ``script`` (its argv after python); ``estimate``: seconds on one H100 (measured
    times win); ``order``: steps run by it, lowest first; ``search``: the journal of its searches;
    ``seed_journal``: committed studies to resume from when runs/optuna has none; ``timed``: measures speed,
    never beside another step; ``min_slot``: the least time worth starting it with; ``per_seed``: keeps each
    finished training seed, so it resumes like a search."""
    notebook: str
    estimate: float
    order: int
    search: str | None = None
    seed_journal: str | None = None
    timed: bool = False
    min_slot: float | None = None
    script: tuple[str, ...] | None = None
    per_seed: bool = False

    @property
    def resumable(self) -> bool:
        return self.search is not None or self.per_seed


@dataclass(frozen=True)
class Notebook:
    """The record of one lab notebook. ``chapter``: where it sits in the course ("1a": Lab 1's first notebook;
    records, plans and pages list notebooks in this order); ``lab``: its results folder (``figures/<lab>/``); ``results``: the
    stored results its readings and answers read; ``figures``: those it draws (``plots.<key>.plot_<figure>``);
    ``answers``: its answers file in the results folder; ``steps``: its regeneration steps; ``seeded``: results
    holding per-seed numbers (claims: enough seeds); ``sft``: (result, where in its numbers, key) of the SFT
    accuracy it reports (claims: one SFT model per seed across labs); ``claims``: "module:function"
    ``(figures dir) -> [Claim]`` checks of its own; ``from_full``: results a run of another profile may not
    measure (another device's, a GPU's on a CPU): its answers then read the full profile's stored ones."""
    key: str
    chapter: str
    lab: str
    settings: Settings | None
    results: tuple[str, ...]
    figures: tuple[str, ...]
    answers: str
    steps: tuple[Step, ...] = ()
    search: Search | None = None
    seeded: tuple[str, ...] = ()
    sft: tuple[str, str, str] | None = None
    claims: tuple[str, ...] = ()
    from_full: tuple[str, ...] = ()

    def targets(self) -> dict[str, str]:
        """Every ``"module:function"`` this record names, by where it names it (``tests/test_wiring.py`` resolves
        them all)."""
        out = {f"claims[{i}]": t for i, t in enumerate(self.claims)}
        if self.settings is not None:
            out.update({f"settings.choices[{k}]": t for k, t in self.settings.choices.items()})
            out.update({f"settings.parsers[{k}]": t for k, t in self.settings.parsers.items()})
        if self.search is not None:
            out.update({"search.objective": self.search.objective, "search.run": self.search.run})
        return out

    def __post_init__(self):
        stray = set(self.figures) - set(self.results)
        if stray:
            raise ValueError(f"record {self.key!r}: figures {sorted(stray)} are not among its results "
                             f"{list(self.results)}")


def locate(target: str) -> tuple[object, str]:
    """The module and attribute name a ``"module:function"`` string names (the one reading of such strings:
    records, searches and exercises all name functions this way); ValueError naming the string otherwise."""
    module, sep, name = target.partition(":")
    if not (sep and module and name.isidentifier()):
        raise ValueError(f"{target!r} is not 'module:function'")
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise ValueError(f"{target!r}: no module {err.name!r}") from None
    if not callable(getattr(found, name, None)):
        raise ValueError(f"{target!r}: module {module} has no function {name!r}")
    return found, name


def resolve(target: str) -> Callable:
    """The function a ``"module:function"`` string names."""
    module, name = locate(target)
    return getattr(module, name)


_FOUND: dict[str, Notebook] | None = None


def records() -> dict[str, Notebook]:
    """Every record, by key, in chapter order: each module of this package (not ``_``-prefixed) holds one ``RECORD``."""
    global _FOUND
    if _FOUND is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("_"):
                continue
            rec = importlib.import_module(f"{__name__}.{info.name}").RECORD
            if rec.key != info.name:
                raise ValueError(f"labkit/records/{info.name}.py declares key {rec.key!r}: a record's key is its "
                                 "module's name")
            found[rec.key] = rec
        _FOUND = dict(sorted(found.items(), key=lambda kv: kv[1].chapter))
    return _FOUND


def get(key: str) -> Notebook:
    """The record of notebook ``key``; a KeyError names the allowed keys."""
    found = records()
    if key not in found:
        raise KeyError(f"unknown notebook {key!r}; allowed: {', '.join(found)}")
    return found[key]


def searches() -> dict[str, Search]:
    """Every notebook's search, by its name."""
    return {r.search.name: r.search for r in records().values() if r.search}


def steps() -> tuple[Step, ...]:
    """The regeneration plan: every record's steps, in their order."""
    return tuple(sorted((s for r in records().values() for s in r.steps), key=lambda s: s.order))


def notebook_seconds(state: dict) -> float:
    """A regeneration record's notebook time (``labkit.maintain.regenerate``'s state): every step's runs, except
    that steps run side by side count once, as their group's wall time (each call's ``side_by_side_s``)."""
    alone = sum(r.get("seconds", 0.0) for s in state.get("steps", {}).values() for r in s.get("runs", [])
                if not r.get("side_by_side"))
    return alone + sum(c.get("side_by_side_s", 0.0) for c in state.get("calls", []))

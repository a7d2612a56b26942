"""Samplers by name, each worker with its own seed.

A worker's seed is derived from the study's seed, the worker id and how many trials that worker has
already run in the study: two workers started together sample different points, and a restarted worker
continues its sequence instead of replaying the points it already tried (the same history gives the
same seed, so a resume is reproducible).
"""
from __future__ import annotations

import zlib

import numpy as np
import optuna

SAMPLERS = ("random", "grid", "tpe", "nsga2")
TPE_STARTUP = 5  # random trials before TPE models the results


def worker_seed(seed: int, worker: int, done: int = 0, salt: str = "") -> int:
    """``salt`` (the sampler's name) gives each sampler its own stream: with one seed, TPE's random
    startup would otherwise replay Random's draws exactly."""
    return int(np.random.SeedSequence([seed, worker, done, zlib.crc32(salt.encode())]).generate_state(1)[0])


def make_sampler(name: str, seed: int, search_space: dict | None = None, n_trials: int | None = None
                 ) -> optuna.samplers.BaseSampler:
    """``random``, ``tpe`` (constant liar: a running trial counts as a bad result, so concurrent workers
    spread out; single- or multi-objective), ``nsga2`` (multi-objective genetic search; population of a
    quarter of ``n_trials``, 8 to 50) or ``grid`` (needs ``search_space``; concurrent plans queue the grid
    instead, see ``StudyPlan``)."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        # TPE reads the finished trials from storage, so a resumed study continues its model
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=TPE_STARTUP, constant_liar=True)
    if name == "nsga2":
        population = min(50, max(8, (n_trials or 200) // 4))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
    if name == "grid":
        if not search_space:
            raise ValueError("the grid sampler needs a finite search space")
        return optuna.samplers.GridSampler(search_space, seed=seed)
    raise ValueError(f"sampler {name!r}: allowed values are {', '.join(map(repr, SAMPLERS))}")


def grid_points(space: dict) -> list[dict]:
    import itertools

    keys = list(space)
    return [dict(zip(keys, values)) for values in itertools.product(*space.values())]


def grid_order(space: dict, seed: int) -> list[dict]:
    """Every grid point once, in a seeded random order (as GridSampler visits them)."""
    points = grid_points(space)
    order = np.random.default_rng(seed).permutation(len(points))
    return [points[i] for i in order]

"""A cache of trial results kept in the study storage itself.

A trial records ``config_key``: a digest of everything that determines its result (the configuration
it trains, the settings, the training seed, the objective's version). Before training, an objective asks
the cache; if any study in the same storage already completed that configuration, the trial reuses that
result and is recorded as ``cached`` (with where it came from). Samplers that revisit a point, the
compression-aware search's first trial (Task 1's best) and repeated notebook runs then cost nothing.
"""
from __future__ import annotations

import hashlib
import json

import optuna
from optuna.trial import TrialState

# Bump when a change to the trial loop would change results for the same configuration.
VERSION = 2
# Per-trial bookkeeping that must not be copied from a cached trial.
_OWN_ATTRS = ("labkit_worker", "config_key", "cached", "cached_from", "retry_of", "retries", "failed_because",
              "enqueued")


def device_settings(s: dict) -> dict:
    """The part of a trial's cache key its device decides (``s["device"]`` as it resolves here): the device type,
    the CPU's precision, and on CUDA the evaluation's attention, the step's kernels, the card and this process's
    share of it, whether the loops are graphed and the determinism mode (each changes a trial's bits)."""
    import torch

    from ..training import cuda_graphs, determinism, precision, train

    out = {"device": train.pick_device(s["device"]).type}
    out.update(precision.cache_key(s))  # the CPU's precision as it resolved here, where it is bf16
    if out["device"] == "cuda":  # which attention the evaluation may use (train.EVAL_SDPA) decides its rounding
        out["eval_sdpa"] = train.EVAL_SDPA
        out.update(train.device_key("cuda"))  # the step, and the card and this process's share of it
        # post-training and its control are graphed as well: not the bits of results stored without this key
        out["graphed_loops"] = "all" if cuda_graphs.wanted(torch.device("cuda"), None) else "none"
        # strict determinism switches attention's backward to its deterministic kernels: other weights
        out["determinism"] = determinism.mode()
    return out


def config_key(parts: dict) -> str:
    text = json.dumps({"version": VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class ResultCache:
    """Looks a ``config_key`` up in every study of ``storage`` (completed, non-cached trials only)."""

    def __init__(self, storage):
        self.storage = storage

    def find(self, key: str) -> tuple[str, optuna.trial.FrozenTrial] | None:
        """(study name, trial) of a completed trial with this key, or None."""
        for study in self.storage.get_all_studies():
            for t in self.storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.COMPLETE,)):
                if t.user_attrs.get("config_key") == key and not t.user_attrs.get("cached"):
                    return study.study_name, t
        return None


def cached_or_run(trial: optuna.Trial, cache: ResultCache | None, key: str, run, from_attrs=None):
    """Return a cached result for ``key`` (copying its user attributes) or ``run()``'s.

    ``from_attrs(user_attrs)``: compute the objective value from the cached trial's measurements instead of
    reusing its value (e.g. several studies weigh the same accuracy and bits differently)."""
    trial.set_user_attr("config_key", key)
    found = cache.find(key) if cache is not None else None
    if found is None:
        return run()
    study_name, hit = found
    for name, value in hit.user_attrs.items():
        if name not in _OWN_ATTRS:
            trial.set_user_attr(name, value)
    trial.set_user_attr("cached", True)
    trial.set_user_attr("cached_from", f"{study_name}#{hit.number}")
    if from_attrs is not None:
        return from_attrs(hit.user_attrs)
    return hit.value if len(hit.values) == 1 else hit.values

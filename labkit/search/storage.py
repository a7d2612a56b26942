"""Optuna studies in real storage, so a killed search resumes where it stopped.

Default: SQLite under ``runs/optuna/``; any Optuna RDB URL (``postgresql://...``, ``mysql://...``) is
accepted so several machines can work on one study, and ``journal:PATH`` uses Optuna's journal file.
RDB storages get a heartbeat: a trial whose process died is marked FAIL after ``grace_period`` seconds
and re-queued by ``RetryHeartbeatStaleTrialCallback``.
"""
from __future__ import annotations

import datetime
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from .. import settings

SAMPLERS = ("random", "grid", "tpe")


def default_url(name: str = "lab2") -> str:
    folder = settings.runs_dir() / "optuna"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / f'{name}.db'}"


def make_storage(url: str | None = None, heartbeat_interval: int = 30, grace_period: int = 90,
                 max_retry: int = 2):
    url = url or default_url()
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = Path(url[len("journal:"):])
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise ValueError(f"storage {url!r}: give an RDB URL (sqlite:///path.db, postgresql://...) or "
                         "journal:PATH")
    return RDBStorage(url, heartbeat_interval=heartbeat_interval, grace_period=grace_period,
                      heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry))


def make_sampler(name: str, seed: int, search_space: dict | None = None, offset: int = 0):
    """A sampler by name. ``offset`` (the trials already in the study) shifts the seed on resume, so a
    resumed random search does not replay the sequence it already tried."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed + offset)
    if name == "tpe":
        # TPE reads the finished trials from storage, so a resumed study continues its model
        return optuna.samplers.TPESampler(seed=seed + offset, n_startup_trials=5)
    if name == "grid":
        if not search_space:
            raise ValueError("the grid sampler needs a finite search space")
        return optuna.samplers.GridSampler(search_space, seed=seed)  # skips grid points already run
    raise ValueError(f"sampler {name!r}: allowed values are {', '.join(map(repr, SAMPLERS))}")


def finished(study: optuna.Study) -> int:
    return sum(t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
               for t in study.get_trials(deepcopy=False))


def run_study(name: str, objective, n_trials: int, sampler: str = "tpe", seed: int = 0,
              storage=None, search_space: dict | None = None, progress: bool = True) -> optuna.Study:
    """Create or load study ``name`` and run it until ``n_trials`` trials have finished.

    Finished trials from earlier (killed) runs count, so calling this again resumes.
    """
    storage = storage if storage is not None and not isinstance(storage, str) else make_storage(storage)
    probe = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True,
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    done = finished(probe)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=make_sampler(sampler, seed, search_space, offset=done))
    study.set_user_attr("sampler", sampler)
    if hasattr(storage, "heartbeat_interval") and storage.heartbeat_interval:
        optuna.storages.fail_stale_trials(study)  # re-queue trials of a process that died
        _fail_trials_without_heartbeat(storage, study)
    attempts = 0
    while finished(study) < n_trials:
        if attempts >= 2 * n_trials:  # every trial failing is a bug to report, not to retry forever
            raise RuntimeError(f"study {name!r}: {attempts} attempts and only {finished(study)} of "
                               f"{n_trials} trials finished; see the failed trials' errors")
        todo = n_trials - finished(study)
        attempts += todo
        study.optimize(objective, n_trials=todo, show_progress_bar=progress,
                       catch=(RuntimeError, FloatingPointError))
        if sampler == "grid" and finished(study) >= len(_grid_points(search_space)):
            break
    return study


def _fail_trials_without_heartbeat(storage: RDBStorage, study: optuna.Study) -> None:
    """Mark FAIL the RUNNING trials that never recorded a heartbeat and started over a grace period ago.

    Optuna's stale-trial check skips trials with no heartbeat row, so a process killed between creating
    a trial and its first heartbeat would leave that trial RUNNING forever. A live trial records its
    first heartbeat as it starts, so one without any after the grace period belongs to a dead process.
    """
    from optuna.storages._rdb import models  # heartbeat rows are not exposed publicly

    grace = datetime.timedelta(seconds=storage.grace_period or 2 * storage.heartbeat_interval)
    now = datetime.datetime.now()
    running = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
               if t.datetime_start is not None and now - t.datetime_start > grace]
    if not running:
        return
    session = storage.scoped_session()
    try:
        beating = {row.trial_id for row in session.query(models.TrialHeartbeatModel).filter(
            models.TrialHeartbeatModel.trial_id.in_([t._trial_id for t in running]))}
    finally:
        session.close()
    for trial in running:
        if trial._trial_id not in beating:
            storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)


def _grid_points(space: dict) -> list:
    import itertools

    return list(itertools.product(*space.values()))


def best_so_far(study: optuna.Study, key: str | None = None) -> list[float]:
    """Best value (or user attribute ``key``) after each finished trial, in trial order."""
    best, out = float("-inf"), []
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        value = t.value if key is None else t.user_attrs.get(key)
        if value is not None:
            best = max(best, value)
        out.append(best)
    return out

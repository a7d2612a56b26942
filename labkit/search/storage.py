"""Optuna studies in real storage, shared by concurrent workers, so a killed search resumes.

Default: Optuna's journal file under ``runs/optuna/`` (``journal:PATH``: one host, many processes, file
locks). Any Optuna RDB URL (``postgresql://...``, ``sqlite:///...``) works too; PostgreSQL is the one for
workers on several machines. RDB storages get Optuna's heartbeat, so a trial whose machine died is
failed after ``grace_period`` seconds and re-queued.

Every trial records which process runs it (host, boot, pid, process start time). A RUNNING trial whose
process is gone (same host: the pid is dead or belongs to a later process; another boot; or, on a
journal, another host) is failed and its parameters queued again, whenever a worker or the launcher
looks, whatever the grace period: a killed worker never leaves a trial RUNNING, and a live one is
never touched.
"""
from __future__ import annotations

import datetime
import os
import socket
import warnings
from pathlib import Path

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from .. import settings
# the URL checks and the race-safe open live in study_storage (no torch: the dashboard uses them)
from .study_storage import STORAGE_FORMS, check_rdb_url, open_storage, shown_url, unpacked_journal

WORKER_ATTR = "labkit_worker"
UNCLAIMED_GRACE_S = 60  # a trial gets its worker record within milliseconds of being created
MAX_RETRIES = 2


def default_url(name: str = "lab2") -> str:
    folder = settings.runs_dir() / "optuna"
    folder.mkdir(parents=True, exist_ok=True)
    return f"journal:{folder / f'{name}.journal'}"


def absolute_url(url, base: Path | None = None):
    """A journal or SQLite URL with a relative path made absolute against ``base`` (the caller's working
    directory): notebooks run in notebooks/, so a path given on the command line must not move with them."""
    base = Path(base or Path.cwd())
    if isinstance(url, str) and url.startswith("journal:") and not Path(url[8:]).is_absolute():
        return "journal:" + str(base / url[8:])
    if isinstance(url, str) and url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        return "sqlite:///" + str(base / url[10:])
    return url


def make_storage(url: str | None = None, heartbeat_interval: int = 30, grace_period: int = 90,
                 max_retry: int = MAX_RETRIES):
    """The storage behind ``url`` (default: Lab 2's journal), checked (one clear error per bad URL or path)
    and safe to open from several processes at once, also a new database (``labkit.search.study_storage``)."""
    url = url or default_url()
    if isinstance(url, optuna.storages.BaseStorage):
        return url
    if not isinstance(url, str):
        raise TypeError(f"storage must be a URL string (journal:PATH, postgresql://..., sqlite:///...) or an "
                        f"Optuna storage, got {url!r}")
    if url.startswith("journal:") or "://" not in url:
        return open_storage(url)
    kwargs = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}  # concurrent writers wait, not fail
    with warnings.catch_warnings():
        # Optuna marks heartbeats "experimental" (since v2.8); labkit relies on them deliberately
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return open_storage(url, heartbeat_interval=heartbeat_interval, grace_period=grace_period,
                            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry),
                            **kwargs)


def is_journal(storage) -> bool:
    from optuna.storages.journal import JournalStorage

    return isinstance(storage, JournalStorage)


# --- which process runs a trial ---------------------------------------------------------------------

def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def identity(worker: int | None = None) -> dict:
    from ..results import device_name, git_commit  # lazy: results imports torch
    pid = os.getpid()
    # commit, device: a study resumed across calls (or machines) may mix them; each trial says which ran it
    return {"host": socket.gethostname(), "boot": _boot_id(), "pid": pid, "started": _process_start(pid),
            "worker": worker, "commit": git_commit(), "device": device_name()}


def _is_dead(record: dict | None, trial: optuna.trial.FrozenTrial, journal: bool, now, grace: float) -> bool:
    if not record:  # created, but its process never said who it is: dead once that is overdue
        return trial.datetime_start is not None and (now - trial.datetime_start).total_seconds() > grace
    if record.get("host") != socket.gethostname():
        return journal  # a journal is one host's; across hosts, RDB heartbeats decide
    if record.get("boot") != _boot_id():
        return True
    started = _process_start(int(record["pid"]))
    return started is None or (record.get("started") is not None and abs(started - record["started"]) > 1e-3)


def reap_stale(study: optuna.Study) -> list[int]:
    """Fail the RUNNING trials of dead processes and queue their parameters again (up to MAX_RETRIES
    times per trial); returns the failed trial numbers."""
    storage = study._storage
    backend = getattr(storage, "_backend", storage)  # a Study wraps an RDB storage in optuna's cache
    if getattr(backend, "heartbeat_interval", None):
        optuna.storages.fail_stale_trials(study)  # other machines' dead trials (RDB heartbeat)
    journal = is_journal(storage)
    grace = getattr(backend, "grace_period", None) or UNCLAIMED_GRACE_S
    now = datetime.datetime.now()
    reaped = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not _is_dead(trial.user_attrs.get(WORKER_ATTR), trial, journal, now, grace):
            continue
        try:  # the reason first (a finished trial takes no attributes), then the state, which only one
            # reaper can change: the others get False or UpdateFinishedTrialError and leave it
            storage.set_trial_user_attr(trial._trial_id, "failed_because", "its worker process died")
            if not storage.set_trial_state_values(trial._trial_id, TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # it finished (or another reaper failed it) since we looked
        reaped.append(trial.number)
        requeue(study, trial)
    return reaped


def requeue(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
    """Queue a failed trial's point again (up to MAX_RETRIES times per point), so a grid study, whose
    points are queued once, loses none to a crash or an out-of-memory error; True if queued."""
    # a queued trial that died before its objective asked for every parameter still has its fixed point
    point = {**trial.system_attrs.get("fixed_params", {}), **trial.params}
    retries = trial.user_attrs.get("retries", 0)
    if not point or retries >= MAX_RETRIES:
        return False
    study.enqueue_trial(point, user_attrs={"retry_of": trial.number, "retries": retries + 1}, skip_if_exists=False)
    return True


def retried(study: optuna.Study) -> set[int]:
    """Numbers of the trials whose point was queued again (a later trial says ``retry_of`` them)."""
    return {t.user_attrs["retry_of"] for t in study.get_trials(deepcopy=False) if "retry_of" in t.user_attrs}


def requeue_lost(study: optuna.Study) -> list[int]:
    """Queue again the failed points of a grid study that were never queued again (trials stored before
    out-of-memory points were retried, or whose worker died before requeueing): on resume the grid gets
    them back instead of ending with holes. Returns the trial numbers queued again."""
    again = retried(study)
    lost = [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
            if t.number not in again and requeue(study, t)]
    return [t.number for t in lost]


# --- counting ----------------------------------------------------------------------------------------

def counts(study: optuna.Study) -> dict:
    """Trials by state (lower-case state names)."""
    out = {s.name.lower(): 0 for s in TrialState}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name.lower()] += 1
    return out


def finished(study: optuna.Study) -> int:
    c = counts(study)
    return c["complete"] + c["pruned"]

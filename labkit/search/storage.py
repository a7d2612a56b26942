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
import lzma
import os
import socket
import warnings
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from .. import settings

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


def shown_url(url) -> str:
    """A storage URL as prose shows it: paths inside the project relative to its root (no machine's
    absolute path in committed answers), and no password of an RDB URL."""
    text = str(url)
    root = str(settings.REPO_ROOT) + "/"
    text = text.replace("journal:" + root, "journal:").replace("sqlite:///" + root, "sqlite:///")
    if "://" in text and "@" in text.split("://", 1)[1]:
        scheme, rest = text.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        text = f"{scheme}://{cred.split(':')[0]}:***@{host}" if ":" in cred else text
    return text


def unpacked_journal(path: Path) -> Path:
    """``path``, or for a committed ``*.journal.xz`` (studies published beside a lab's figures, compressed: a
    journal is ~40x its xz) its text unpacked once under ``runs/optuna/unpacked/``, where Optuna can lock and
    append to it; the committed file itself is never written."""
    if path.suffix != ".xz":
        return path
    out = settings.runs_dir() / "optuna" / "unpacked" / f"{path.parent.name}-{path.stem}"
    if not out.is_file() or out.stat().st_mtime < path.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".part")
        tmp.write_bytes(lzma.decompress(path.read_bytes()))
        tmp.replace(out)  # whole or absent: a concurrent reader never sees half a journal
    return out


def make_storage(url: str | None = None, heartbeat_interval: int = 30, grace_period: int = 90,
                 max_retry: int = MAX_RETRIES):
    url = url or default_url()
    if isinstance(url, optuna.storages.BaseStorage):
        return url
    if not isinstance(url, str):
        raise TypeError(f"storage must be a URL string (journal:PATH, postgresql://..., sqlite:///...) or an "
                        f"Optuna storage, got {url!r}")
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = unpacked_journal(Path(url[len("journal:"):]))
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise ValueError(f"storage {url!r}: give journal:PATH (one host) or an RDB URL (postgresql://..., "
                         "sqlite:///path.db)")
    check_rdb_url(url)
    kwargs = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}  # concurrent writers wait, not fail
    with warnings.catch_warnings():
        # Optuna marks heartbeats "experimental" (since v2.8); labkit relies on them deliberately
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RDBStorage(url, heartbeat_interval=heartbeat_interval, grace_period=grace_period,
                          heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry),
                          **kwargs)


STORAGE_FORMS = ("journal:PATH (one host), sqlite:///PATH (one host; sqlite:////PATH for an absolute path) or "
                 "postgresql://USER:PASSWORD@HOST/DB (several machines)")
# SQLAlchemy's own dialects: what an RDB URL can name when SQLAlchemy is not there to ask
BUILTIN_DIALECTS = ("postgresql", "sqlite", "mysql", "mariadb", "oracle", "mssql")


def check_rdb_url(url: str) -> None:
    """An RDB URL that names a known database, whose driver imports and, for SQLite, whose folder exists
    and is writable: otherwise one error naming the storage setting and the allowed forms (not a
    SQLAlchemy traceback from the first connection)."""
    shown, scheme = shown_url(url), url.split("://", 1)[0]
    dialect = scheme.split("+", 1)[0]
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    except ImportError:
        if dialect not in BUILTIN_DIALECTS:
            raise ValueError(f"storage {shown!r}: unknown database {dialect!r}; allowed: {STORAGE_FORMS}") from None
        raise ModuleNotFoundError(f"storage {shown!r}: an RDB storage needs the sqlalchemy package (pip install "
                                  f"sqlalchemy; 'labkit[postgres]' for PostgreSQL), or use journal:PATH") from None
    try:
        dialect_cls = make_url(url).get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"storage {shown!r}: unknown database {scheme!r}; allowed: {STORAGE_FORMS}") from None
    except (ArgumentError, ValueError) as err:
        raise ValueError(f"storage {shown!r} is not a valid database URL ({err}); allowed: {STORAGE_FORMS}") from None
    try:
        dialect_cls.import_dbapi()
    except ImportError as err:
        extra = " (pip install 'labkit[postgres]')" if scheme in ("postgresql", "postgresql+psycopg") else ""
        raise ModuleNotFoundError(f"storage {shown!r}: the {scheme} driver is not installed ({err}){extra}; "
                                  "or use journal:PATH") from None
    if dialect == "sqlite":
        _check_sqlite_path(url, shown)


def _check_sqlite_path(url: str, shown: str) -> None:
    """SQLite creates its file on first use: a missing or read-only folder fails there as 'unable to open
    database file', which names neither the setting nor the folder."""
    path = url.split("://", 1)[1].split("?", 1)[0][1:]  # sqlite:///rel.db -> rel.db, sqlite:////abs -> /abs
    if path in ("", ":memory:"):
        return
    db = Path(path).absolute()
    if db.is_dir():
        raise ValueError(f"storage {shown!r}: {db} is a folder; give the database file, e.g. sqlite:///{db}/lab2.db")
    folder = db.parent
    if not folder.is_dir():
        raise ValueError(f"storage {shown!r}: the database's folder {folder} does not exist (create it first); "
                         f"allowed: {STORAGE_FORMS}")
    try:  # a real write (os.access says yes to root on /proc), also where SQLite puts its journal
        import tempfile

        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise ValueError(f"storage {shown!r}: the database's folder {folder} is not writable (a test file "
                         f"there: {err.strerror or err}); allowed: {STORAGE_FORMS}") from None
    if db.exists() and not os.access(db, os.W_OK):
        raise ValueError(f"storage {shown!r}: the database file {db} is read-only; allowed: {STORAGE_FORMS}")


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
    if getattr(storage, "heartbeat_interval", None):
        optuna.storages.fail_stale_trials(study)  # other machines' dead trials (RDB heartbeat)
    journal = is_journal(storage)
    grace = getattr(storage, "grace_period", None) or UNCLAIMED_GRACE_S
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

"""Opening an Optuna storage from a URL, without importing torch (``labkit dashboard`` uses it too).

- A bad URL or path is one error naming the setting (``storage``, ``--storage``), the value and the allowed
  forms, not an OSError or a SQLAlchemy traceback from the first write.
- Several processes may open one new database at the same instant. Optuna creates its tables and stamps
  their version on first open, and two processes doing that together fail (``table studies already
  exists``, ``UNIQUE constraint failed: alembic_version.version_num``). So the open runs under a lock
  (SQLite: ``flock`` on the database's folder; PostgreSQL: an advisory lock) and is retried on those
  errors (other databases, or a file system without ``flock``).
"""
from __future__ import annotations

import contextlib
import lzma
import os
import random
import tempfile
import time
from pathlib import Path

from .. import settings

STORAGE_FORMS = ("journal:PATH (one host), sqlite:///PATH (one host; sqlite:////PATH for an absolute path) or "
                 "postgresql://USER:PASSWORD@HOST/DB (several machines)")
# SQLAlchemy's own dialects: what an RDB URL can name when SQLAlchemy is not there to ask
BUILTIN_DIALECTS = ("postgresql", "sqlite", "mysql", "mariadb", "oracle", "mssql")
# what a first open loses to another process creating the same schema: worth another try
SCHEMA_RACE = ("already exists", "unique constraint failed", "duplicate key value", "duplicate entry")
OPEN_TRIES = 6
PG_LOCK_KEY = 0x6C61626B6974  # "labkit": the advisory lock every labkit process takes to open a database


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
        tmp = out.with_suffix(f".part{os.getpid()}")  # one per process: two unpacking at once never mix
        tmp.write_bytes(lzma.decompress(path.read_bytes()))
        tmp.replace(out)  # whole or absent: a concurrent reader never sees half a journal
    return out


def open_storage(url: str, key: str = "storage", create: bool = True, **rdb_kwargs):
    """The Optuna storage behind ``url`` (``journal:PATH`` or an RDB URL). ``key`` names the setting in
    errors; ``create=False`` (the dashboard) refuses a journal or SQLite file that does not exist yet instead
    of creating an empty one. ``rdb_kwargs`` go to ``RDBStorage``."""
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return JournalStorage(JournalFileBackend(str(journal_path(url, key, create))))
    if "://" not in url:
        raise ValueError(f"{key} {url!r}: give journal:PATH (one host) or an RDB URL (postgresql://..., "
                         "sqlite:///path.db)")
    check_rdb_url(url, key, create)
    return open_rdb(url, key, **rdb_kwargs)


def journal_path(url: str, key: str = "storage", create: bool = True) -> Path:
    """The file to open for ``journal:PATH`` (a ``.xz`` one unpacked), after checking it can be: its folder
    exists (``create``: is made) and is writable (Optuna locks the journal with a file beside it)."""
    shown, raw = shown_url(url), url[len("journal:"):]
    if not raw:
        raise ValueError(f"{key} {shown!r}: no path after 'journal:'; allowed: {STORAGE_FORMS}")
    path = Path(raw).absolute()
    if path.is_dir():
        raise ValueError(f"{key} {shown!r}: {path} is a folder; give the journal file, e.g. "
                         f"journal:{path}/lab2.journal")
    if path.suffix == ".xz":
        if not path.is_file():
            raise FileNotFoundError(f"{key} {shown!r}: the compressed journal {path} does not exist; allowed: "
                                    f"{STORAGE_FORMS} (PATH may end in .xz)")
        return unpacked_journal(path)
    if not create and not path.is_file():
        raise FileNotFoundError(f"{key} {shown!r}: the journal {path} does not exist; check the path")
    if create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"{key} {shown!r}: the journal's folder {path.parent} does not exist and cannot be "
                             f"created ({err.strerror or err}); allowed: {STORAGE_FORMS}") from None
    _check_writable(path, "journal", key, shown)
    return path


def _check_writable(path: Path, what: str, key: str, shown: str) -> None:
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"{key} {shown!r}: the {what}'s folder {folder} does not exist (create it first); "
                         f"allowed: {STORAGE_FORMS}")
    try:  # a real write (os.access says yes to root on /proc); the folder also takes the lock or SQLite's journal
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        raise ValueError(f"{key} {shown!r}: the {what}'s folder {folder} is not writable (a test file there: "
                         f"{err.strerror or err}); allowed: {STORAGE_FORMS}") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{key} {shown!r}: the {what} file {path} is read-only; allowed: {STORAGE_FORMS}")


def check_rdb_url(url: str, key: str = "storage", create: bool = True) -> None:
    """An RDB URL that names a known database, whose driver imports and, for SQLite, whose folder exists
    and is writable: otherwise one error naming ``key`` and the allowed forms (not a SQLAlchemy traceback
    from the first connection)."""
    shown, scheme = shown_url(url), url.split("://", 1)[0]
    dialect = scheme.split("+", 1)[0]
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    except ImportError:
        if dialect not in BUILTIN_DIALECTS:
            raise ValueError(f"{key} {shown!r}: unknown database {dialect!r}; allowed: {STORAGE_FORMS}") from None
        raise ModuleNotFoundError(f"{key} {shown!r}: an RDB storage needs the sqlalchemy package (pip install "
                                  f"sqlalchemy; 'labkit[postgres]' for PostgreSQL), or use journal:PATH") from None
    try:
        dialect_cls = make_url(url).get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"{key} {shown!r}: unknown database {scheme!r}; allowed: {STORAGE_FORMS}") from None
    except (ArgumentError, ValueError) as err:
        raise ValueError(f"{key} {shown!r} is not a valid database URL ({err}); allowed: {STORAGE_FORMS}") from None
    try:
        dialect_cls.import_dbapi()
    except ImportError as err:
        extra = " (pip install 'labkit[postgres]')" if scheme in ("postgresql", "postgresql+psycopg") else ""
        raise ModuleNotFoundError(f"{key} {shown!r}: the {scheme} driver is not installed ({err}){extra}; "
                                  "or use journal:PATH") from None
    db = sqlite_file(url)
    if db is not None:
        if db.is_dir():
            raise ValueError(f"{key} {shown!r}: {db} is a folder; give the database file, e.g. sqlite:///{db}/lab2.db")
        if not create and not db.is_file():
            raise FileNotFoundError(f"{key} {shown!r}: the database {db} does not exist; check the path")
        _check_writable(db, "database", key, shown)


def sqlite_file(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL (absolute), None for another database or an in-memory one."""
    if url.split("://", 1)[0].split("+", 1)[0] != "sqlite":
        return None
    path = url.split("://", 1)[1].split("?", 1)[0][1:]  # sqlite:///rel.db -> rel.db, sqlite:////abs -> /abs
    return None if path in ("", ":memory:") else Path(path).absolute()


def open_rdb(url: str, key: str = "storage", **kwargs):
    """``RDBStorage(url, **kwargs)``, safe when other processes open the same new database at once."""
    from optuna.storages import RDBStorage
    from sqlalchemy.exc import DBAPIError

    shown = shown_url(url)
    for attempt in range(OPEN_TRIES):
        try:
            with _first_open_lock(url):
                return RDBStorage(url, **kwargs)
        except DBAPIError as err:
            text = str(err.orig if err.orig is not None else err)
            if attempt + 1 < OPEN_TRIES and any(s in text.lower() for s in SCHEMA_RACE):
                time.sleep(0.05 * (attempt + 1) * (1 + random.random()))  # apart, so one of them wins next time
                continue
            raise ValueError(f"{key} {shown!r}: cannot open the database ({text.strip().splitlines()[0]}); "
                             f"check the server, user, password and database name; allowed: {STORAGE_FORMS}") from err
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _first_open_lock(url: str):
    """Held while Optuna opens (and maybe creates) the database: SQLite an exclusive ``flock`` on its folder
    (no lock file left behind), PostgreSQL a session advisory lock; others none (open_rdb retries)."""
    db, dialect = sqlite_file(url), url.split("://", 1)[0].split("+", 1)[0]
    if db is not None:
        fd = os.open(db.parent, os.O_RDONLY)
        try:
            try:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX)
            except (ImportError, OSError):  # no flock here (Windows, some network file systems): retries only
                pass
            yield
        finally:
            os.close(fd)  # releases the flock
    elif dialect == "postgresql":
        import sqlalchemy

        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": PG_LOCK_KEY})
                try:
                    yield
                finally:
                    conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": PG_LOCK_KEY})
        finally:
            engine.dispose()
    else:
        yield

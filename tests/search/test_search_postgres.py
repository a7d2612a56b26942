"""Searches across machines use PostgreSQL: a real server (Debian's postgresql, started here in a
temporary folder) and two concurrent worker processes on one study."""
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import optuna
import pytest

from labkit.search import StudyPlan, run_studies
from labkit.search.storage import WORKER_ATTR

HERE = Path(__file__).resolve().parents[1]  # tests/: the helper modules beside conftest.py


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="module")
def postgres_url():
    bindir = _bindir()
    if bindir is None:
        if os.environ.get("LABKIT_REQUIRE_POSTGRES") == "1":  # CI installs it: missing there is a failure
            pytest.fail("PostgreSQL's initdb/pg_ctl not found (apt-get install postgresql)")
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    pytest.importorskip("psycopg")
    root = Path(tempfile.mkdtemp(prefix="labkit-pg-"))  # not pytest's tmp: that is private to this user
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    as_user = []
    if os.geteuid() == 0:  # the server refuses to run as root: use Debian's postgres account
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(as_user + [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "labkit"],
                   check=True, capture_output=True)
    subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o",
                              f"-p {port} -k {sock} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql://labkit@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(as_user + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_study_on_postgresql(postgres_url, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(HERE))
    plan = StudyPlan("pg", "_search_toy:architecture", {}, {"sleep": 0.3}, "random", 0, 12)
    start = time.time()
    study = run_studies([plan], storage=postgres_url, workers=2, progress=False, poll=0.3,
                        log_dir=tmp_path / "logs")["pg"]
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(trials) >= 12
    params = [json.dumps(t.params, sort_keys=True) for t in trials]
    assert len(set(params)) == len(params)  # per-worker seeds: no architecture drawn twice
    assert {t.user_attrs[WORKER_ATTR]["worker"] for t in trials} == {0, 1}
    # both worked at the same time: their trials overlap in time
    spans = {w: [(t.datetime_start, t.datetime_complete) for t in trials if t.user_attrs[WORKER_ATTR]["worker"] == w]
             for w in (0, 1)}
    assert any(a0 < b1 and b0 < a1 for a0, a1 in spans[0] for b0, b1 in spans[1])
    assert time.time() - start < 120


def test_four_workers_start_together_on_a_new_postgresql_database(postgres_url, monkeypatch):
    # Optuna creates its tables on a database's first open: four processes doing it at once must all start
    # (labkit takes an advisory lock around the open); each repetition on a new, empty database
    import psycopg

    monkeypatch.syspath_prepend(str(HERE))  # its spawned process imports _storage_race by name
    import _storage_race

    repeats, base = 20, postgres_url.rsplit("/", 1)[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for i in range(repeats):
            conn.execute(f"CREATE DATABASE race{i}")
    crashes, wrong = _storage_race.race([f"{base}/race{i}" for i in range(repeats)])
    n = repeats * _storage_race.N_PROCS
    assert crashes == [], f"{len(crashes)} of {n} processes crashed; the first:\n{crashes[0]}"
    assert wrong == []

"""Workers started at the same instant on a new storage all start: Optuna creates its tables on first
open, and before labkit opened databases under a lock, 8 of 20 such processes died (``table studies already
exists``, ``UNIQUE constraint failed: alembic_version.version_num``). PostgreSQL: tests/search/test_search_postgres.py."""
import json
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest

from labkit.search import study_storage
from labkit.search import StudyPlan, make_storage, worker

HERE = Path(__file__).resolve().parents[1]  # tests/: the helper modules beside conftest.py
sys.path.insert(0, str(HERE))  # its spawned process imports _storage_race by name

import _storage_race  # noqa: E402

REPEATS = 20


def test_four_workers_start_together_on_a_new_sqlite_storage(tmp_path):
    crashes, wrong = _storage_race.race([f"sqlite:///{tmp_path / f'r{i}.db'}" for i in range(REPEATS)])
    n = REPEATS * _storage_race.N_PROCS
    assert crashes == [], f"{len(crashes)} of {n} processes crashed; the first:\n{crashes[0]}"
    assert wrong == []
    assert not list(tmp_path.glob("*.lock"))  # the lock is on the folder: nothing left beside the databases


def test_a_study_created_by_another_process_is_used_once_its_plan_is_stored(tmp_path, monkeypatch):
    # a process that loses the creation race may load the study before its creator stored the plan and
    # queued the grid: it must wait for "ready", not run with an empty queue
    storage = make_storage(f"journal:{tmp_path / 'p.journal'}")
    plan = StudyPlan("p", "in-process", {}, sampler="grid", n_trials=2, grid={"x": [0, 1]})
    created = optuna.create_study(study_name="p", storage=storage, direction="maximize")  # the creator, half way

    def finish():
        time.sleep(0.5)
        created.set_user_attr("plan", json.loads(plan.to_json()))
        for x in (0, 1):
            created.enqueue_trial({"x": x})
        created.set_user_attr("ready", True)

    threading.Thread(target=finish).start()
    study = worker.ensure_study(storage, plan)
    assert study.user_attrs["ready"] is True and len(study.trials) == 2
    # a study some other code made (no plan, ever) is used as it is after a grace, not waited on forever
    monkeypatch.setattr(worker, "PLAN_GRACE_S", 0.3)
    optuna.create_study(study_name="q", storage=storage, direction="maximize")
    began = time.time()
    other = worker.ensure_study(storage, StudyPlan("q", "in-process", {}, sampler="random", n_trials=1))
    assert "plan" not in other.user_attrs and 0.3 <= time.time() - began < 5


def test_a_first_open_that_loses_the_schema_race_is_retried(monkeypatch):
    # where no lock serialises the first open (a database other than SQLite and PostgreSQL, a file system
    # without flock), the known schema-creation errors are retried; anything else is one clear error
    from sqlalchemy.exc import OperationalError  # not at the top: the GPU kit, which collects this file, has none

    calls = []

    def flaky(url, **kwargs):
        calls.append(url)
        if len(calls) == 1:
            raise OperationalError("CREATE TABLE studies", {}, Exception("table studies already exists"))
        return "storage"

    monkeypatch.setattr(optuna.storages, "RDBStorage", flaky)
    assert study_storage.open_rdb("mysql://h/db") == "storage" and len(calls) == 2
    calls.clear()

    def down(url, **kwargs):
        calls.append(url)
        raise OperationalError("connect", {}, Exception("connection refused"))

    monkeypatch.setattr(optuna.storages, "RDBStorage", down)
    with pytest.raises(ValueError, match=r"storage 'mysql://h/db': cannot open the database \(connection refused\)"):
        study_storage.open_rdb("mysql://h/db")
    assert len(calls) == 1  # not a schema race: no retry

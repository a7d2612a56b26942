"""The search engine: concurrent workers on shared storage, per-worker seeds, queued grids, dead-worker
reaping, the result cache, progress lines, and the CLI. Objectives here are toys (no training), so the
tests exercise the engine, not the models; tests/search/test_search.py covers the Lab 2 objective."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from labkit import cli, search
from labkit.search import StudyPlan, run_studies
from labkit.search.cache import ResultCache, cached_or_run
from labkit.search.storage import WORKER_ATTR, identity

optuna.logging.set_verbosity(optuna.logging.WARNING)
HERE = Path(__file__).resolve().parents[1]  # tests/: the helper modules beside conftest.py
TOY = "_search_toy:factory"  # tests/_search_toy.py, importable by worker processes (PYTHONPATH below)


@pytest.fixture(autouse=True)
def toy_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]))


def complete(study):
    return [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]


def test_worker_seeds_differ_by_worker_sampler_and_history():
    seeds = {search.worker_seed(0, w, d, s) for w in range(4) for d in range(3) for s in ("random", "tpe")}
    assert len(seeds) == 24
    assert search.worker_seed(5, 1, 2, "tpe") == search.worker_seed(5, 1, 2, "tpe")  # stable on resume


def test_two_workers_started_together_never_sample_the_same_architecture(tmp_path):
    # Both workers start at once on one random-sampler study; with a shared seed they would draw the same
    # architectures in the same order.
    plan = StudyPlan("nas", "_search_toy:architecture", {}, {"sleep": 0.3}, "random", 0, 12)
    study = run_studies([plan], storage=f"journal:{tmp_path / 's.journal'}", workers=2, progress=False,
                        poll=0.2, log_dir=tmp_path / "logs")["nas"]
    trials = complete(study)
    assert len(trials) >= 12
    archs = [json.dumps(t.params, sort_keys=True) for t in trials]
    assert len(set(archs)) == len(archs)
    assert {t.user_attrs[WORKER_ATTR]["worker"] for t in trials} == {0, 1}


def test_concurrent_grid_runs_each_queued_point_once(tmp_path):
    grid = {"x": list(range(10)), "y": ["a", "b"]}
    plan = StudyPlan("grid", TOY, {}, {"sleep": 0.1}, "grid", 4, 12, grid=grid)
    study = run_studies([plan], storage=f"journal:{tmp_path / 'g.journal'}", workers=3, progress=False,
                        poll=0.2, log_dir=tmp_path / "logs")["grid"]
    points = [(t.params["x"], t.params["y"]) for t in complete(study)]
    assert len(points) == 12 and len(set(points)) == 12
    expected = [(p["x"], p["y"]) for p in search.grid_order(grid, 4)[:12]]
    assert sorted(points) == sorted(expected)  # exactly the first 12 points of the seeded order


def test_plans_fill_together_and_queue_first(tmp_path):
    plans = [StudyPlan("a", TOY, {}, {"sleep": 0.05}, "tpe", 0, 6, enqueue=[{"x": 7, "y": "b"}]),
             StudyPlan("b", TOY, {}, {"sleep": 0.05}, "random", 1, 4)]
    studies = run_studies(plans, storage=f"journal:{tmp_path / 'p.journal'}", workers=1, progress=False)
    assert len(complete(studies["a"])) == 6 and len(complete(studies["b"])) == 4
    first = min(complete(studies["a"]), key=lambda t: t.number)
    assert first.params == {"x": 7, "y": "b"}


def test_a_finished_search_run_again_starts_no_workers(tmp_path, monkeypatch):
    from labkit.search import run

    url = f"journal:{tmp_path / 'f.journal'}"
    plan = StudyPlan("fin", TOY, {}, {"sleep": 0}, "random", 0, 3)
    run_studies([plan], storage=url, workers=1, progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("workers started for a finished search")

    for name in ("_run_processes", "launch", "prepare", "release_gpu_memory"):
        monkeypatch.setattr(run, name, refuse)
    monkeypatch.setattr(run.Worker, "run", refuse)
    for workers in (1, 4):
        study = run_studies([plan], storage=url, workers=workers, progress=False)["fin"]
        assert len(complete(study)) == 3
    more = StudyPlan("fin", TOY, {}, {"sleep": 0}, "random", 0, 4)  # one trial short: it runs
    with pytest.raises(AssertionError, match="workers started"):
        run_studies([more], storage=url, workers=1, progress=False)


def _launcher(url, plan, workers, tmp_path):
    code = (f"from labkit.search import StudyPlan, run_studies\n"
            f"plan = StudyPlan(**{json.loads(plan.to_json())!r})\n"
            f"run_studies([plan], storage={url!r}, workers={workers}, progress=False, poll=0.2, "
            f"log_dir={str(tmp_path / 'logs')!r})\n")
    return subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())


def test_kill_9_of_one_worker_loses_no_finished_trial_and_the_study_completes(tmp_path):
    url = f"journal:{tmp_path / 'k.journal'}"
    plan = StudyPlan("kill", TOY, {}, {"sleep": 1.0}, "random", 0, 10)
    launcher = _launcher(url, plan, 2, tmp_path)
    storage = search.make_storage(url)
    victim, deadline, before = None, time.time() + 120, {}
    while time.time() < deadline:
        try:
            study = optuna.load_study(study_name="kill", storage=storage)
        except KeyError:  # not created yet
            time.sleep(0.2)
            continue
        before = {t.number: t.value for t in complete(study)}
        running = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                   if WORKER_ATTR in t.user_attrs]
        if len(before) >= 2 and running:
            victim = running[0]
            break
        time.sleep(0.1)
    assert victim is not None, "the workers made no progress"
    os.kill(victim.user_attrs[WORKER_ATTR]["pid"], signal.SIGKILL)
    assert launcher.wait(timeout=180) == 0  # the other worker finished the study
    study = optuna.load_study(study_name="kill", storage=storage)
    done = {t.number: t.value for t in complete(study)}
    assert len(done) >= 10
    assert all(done[n] == v for n, v in before.items())  # finished trials kept, unchanged
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL and killed.user_attrs["failed_because"] == "its worker process died"
    assert not study.get_trials(states=(TrialState.RUNNING,))
    retried = [t for t in study.trials if t.user_attrs.get("retry_of") == victim.number]
    assert retried and retried[0].params == killed.params  # its point was queued again


def test_an_out_of_memory_grid_point_runs_again_and_errors_are_recorded(tmp_path):
    # A grid queues each point once: a point that failed because other workers filled the GPU was lost
    # (a full-profile Lab 2 grid ended with 18 of 20 points), and the failure's reason was not recorded.
    grid = {"x": [1, 2, 3, 4], "y": ["a"]}
    oom = {"x": 3, "marker": str(tmp_path / "oom-once")}
    plan = StudyPlan("oom", TOY, {}, {"sleep": 0.0, "oom_once": oom}, "grid", 0, 4, grid=grid)
    study = run_studies([plan], storage=f"journal:{tmp_path / 'o.journal'}", workers=1, progress=False)["oom"]
    assert sorted(t.params["x"] for t in complete(study)) == [1, 2, 3, 4]
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and failed[0].params["x"] == 3
    assert failed[0].user_attrs["failed_because"].startswith("CUDA out of memory")
    assert "OutOfMemoryError: CUDA out of memory" in failed[0].user_attrs["error"]
    assert [t.user_attrs.get("retry_of") for t in complete(study) if t.params["x"] == 3] == [failed[0].number]

    bad = StudyPlan("bad", TOY, {}, {"sleep": 0.0, "fail_x": 1}, "grid", 0, 4, grid={"x": [1], "y": ["a"]})
    with pytest.raises(RuntimeError, match="x=1 fails on purpose"):  # the reason, not "(not recorded)"
        run_studies([bad], storage=f"journal:{tmp_path / 'b.journal'}", workers=1, progress=False)


def test_a_dead_workers_trial_is_failed_at_once_and_a_live_ones_is_not(tmp_path):
    storage = search.make_storage(f"journal:{tmp_path / 'r.journal'}")
    study = optuna.create_study(study_name="r", storage=storage, direction="maximize")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        for pid in (sleeper.pid, dead.pid):
            trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
            me = identity(0)
            me.update(pid=pid, started=search.storage._process_start(pid) if pid == sleeper.pid else 1.0)
            trial.set_user_attr(WORKER_ATTR, me)
        reaped = search.reap_stale(study)  # no grace period: the dead pid is known dead now
        states = [t.state for t in study.get_trials(deepcopy=False) if t.number < 2]
        assert reaped == [1] and states == [TrialState.RUNNING, TrialState.FAIL]
        assert study.trials[-1].state == TrialState.WAITING  # its point queued again
    finally:
        sleeper.kill()


def test_a_trial_from_another_boot_is_dead(tmp_path):
    storage = search.make_storage(f"journal:{tmp_path / 'b.journal'}")
    study = optuna.create_study(study_name="b", storage=storage)
    trial = study.ask()
    trial.set_user_attr(WORKER_ATTR, {**identity(0), "boot": "another-boot"})
    assert search.reap_stale(study) == [0]


def test_result_cache_reuses_a_configuration_across_studies(tmp_path):
    storage = search.make_storage(f"journal:{tmp_path / 'c.journal'}")
    cache, runs = ResultCache(storage), []

    def objective(trial):
        x = trial.suggest_int("x", 0, 2)
        return cached_or_run(trial, cache, f"key-{x}", lambda: runs.append(x) or x / 10 + 0.05)

    first = optuna.create_study(study_name="one", storage=storage, direction="maximize")
    for x in (0, 1):
        first.enqueue_trial({"x": x})
    first.optimize(objective, n_trials=2)
    second = optuna.create_study(study_name="two", storage=storage, direction="maximize")
    for x in (1, 2):
        second.enqueue_trial({"x": x})
    second.optimize(objective, n_trials=2)
    assert runs == [0, 1, 2]  # x=1 trained once
    hit = second.trials[0]
    assert hit.user_attrs["cached"] is True and hit.user_attrs["cached_from"] == "one#1"
    assert hit.value == first.trials[1].value
    assert "cached" not in second.trials[1].user_attrs


def test_after_running_out_of_gpu_memory_a_worker_waits_for_another_trial_to_end(tmp_path):
    import threading

    from labkit.search.worker import Worker

    url = f"journal:{tmp_path / 'w.journal'}"
    oom = {"x": 3, "marker": str(tmp_path / "oom-once")}
    plan = StudyPlan("w", TOY, {}, {"sleep": 0.0, "oom_once": oom}, "grid", 0, 2, grid={"x": [3, 4], "y": ["a"]})
    worker = Worker([plan], search.make_storage(url), worker=0, poll=0.05)
    search.worker.ensure_study(worker.storage, plan)
    for _ in range(2):  # until x=3 has run (the grid's seeded order decides when)
        worker.run_one(plan)
        if worker.after_oom:
            break
    assert worker.after_oom  # set by the out-of-memory failure, cleared by run() before it waits

    study = worker._study(plan)
    other = study.ask()  # another worker's trial, running (this live process as its worker)
    other.set_user_attr(WORKER_ATTR, identity(7))
    ended = []
    threading.Timer(0.5, lambda: (study.tell(other, 0.5), ended.append(time.time()))).start()
    worker.wait_for_a_finish(timeout=30)
    assert ended and time.time() >= ended[0]  # it returned only once the other trial had ended
    start = time.time()
    worker.wait_for_a_finish(timeout=30)  # nothing runs now: no wait
    assert time.time() - start < 1


def test_a_free_worker_takes_the_highest_priority_then_the_fewest_running():
    a, b = (StudyPlan(n, TOY, {}, {"sleep": 0}, "random", 0, 4) for n in "ab")
    assert search.worker.pick([(3, 0, a), (1, 1, b)]) is b  # equal priorities: the fewest running
    assert search.worker.pick([(2, 0, a), (2, 1, b)]) is a  # then the plans' order
    a.priority = 1
    assert search.worker.pick([(3, 0, a), (1, 1, b)]) is a  # a higher priority first, however many run


def test_a_worker_runs_the_higher_priority_studys_trials_first(tmp_path):
    plans = [StudyPlan("short", TOY, {}, {"sleep": 0}, "random", 0, 3),
             StudyPlan("long", TOY, {}, {"sleep": 0}, "random", 1, 3, priority=1)]
    studies = run_studies(plans, storage=f"journal:{tmp_path / 'pr.journal'}", workers=1, progress=False)
    started = sorted((t.datetime_start, name) for name, st in studies.items() for t in complete(st))
    assert [name for _, name in started] == ["long"] * 3 + ["short"] * 3


def test_a_different_plan_under_an_existing_name_is_refused(tmp_path):
    url = f"journal:{tmp_path / 'd.journal'}"
    run_studies([StudyPlan("d", TOY, {}, {"sleep": 0}, "random", 0, 2)], storage=url, workers=1, progress=False)
    with pytest.raises(ValueError, match=r"study 'd' exists in this storage with a different plan \(keys \['seed'\]\)"):
        run_studies([StudyPlan("d", TOY, {}, {"sleep": 0}, "random", 1, 2)], storage=url, workers=1, progress=False)


def test_progress_lines_say_done_total_best_and_time(tmp_path, capsys):
    url = f"journal:{tmp_path / 'l.journal'}"
    plan = StudyPlan("l", TOY, {}, {"sleep": 0}, "random", 0, 3)
    best = run_studies([plan], storage=url, workers=1, progress="lines", desc="toy")["l"].best_value
    out = capsys.readouterr().out
    last = [line for line in out.splitlines() if line.startswith("[labkit] toy:")][-1]
    assert "3/3 trials" in last and f"best {best:.4f} (l)" in last and "trials/min" in last


@pytest.mark.parametrize("bad, match", [
    (dict(n_trials=-1), r"n_trials must be an integer >= 1, got -1"),
    (dict(n_trials=0), r"n_trials must be an integer >= 1, got 0"),
    (dict(sampler="cmaes"), r"sampler='cmaes'; allowed values are 'random', 'grid', 'tpe'"),
    (dict(sampler="grid"), r"the grid sampler needs a finite search space"),
    (dict(objective="nowhere"), r"objective 'nowhere' unknown; allowed: lab2"),
    (dict(priority=1.5), r"priority must be an integer, got 1.5"),
    (dict(priority=True), r"priority must be an integer, got True"),
])
def test_bad_plans_are_refused_before_any_worker_starts(bad, match):
    with pytest.raises((ValueError, KeyError), match=match):
        StudyPlan(**{**dict(name="x", objective=TOY, settings={}), **bad})


def test_run_study_refuses_negative_trials_and_bad_workers(tmp_path):
    with pytest.raises(ValueError, match="n_trials must be an integer >= 1, got -1"):
        search.run_study("x", lambda t: 0.0, -1, storage=f"journal:{tmp_path / 'x.journal'}")
    with pytest.raises(ValueError, match="workers=0: allowed values are 'auto' or an integer >= 1"):
        search.resolve_workers(0)


def test_cli_worker_joins_stored_studies_and_status_lists_them(tmp_path, capsys):
    url = f"journal:{tmp_path / 'cli.journal'}"
    plan = StudyPlan("joinme", TOY, {}, {"sleep": 0}, "random", 0, 4)
    search.worker.ensure_study(search.make_storage(url), plan)  # created elsewhere, no trial run yet
    assert cli.main(["search", "worker", "--storage", url, "--study", "joinme", "--workers", "1"]) == 0
    assert cli.main(["search", "status", "--storage", url]) == 0
    best = optuna.load_study(study_name="joinme", storage=search.make_storage(url)).best_value
    assert f"joinme: 4/4 finished, 0 running, 0 queued, 0 failed, best {best:.4f}" in capsys.readouterr().out
    assert cli.main(["search", "worker", "--storage", url, "--study", "nope"]) == 2
    assert "no study ['nope']" in capsys.readouterr().err


def test_a_plan_stored_by_an_older_labkit_or_run_differently_is_the_same_study(tmp_path):
    url = f"journal:{tmp_path / 'o.journal'}"
    storage = search.make_storage(url)
    plan = StudyPlan("o", TOY, {"lr": 1.0}, {"sleep": 0}, "random", 0, 2)
    study = optuna.create_study(study_name="o", storage=storage, direction="maximize")
    old = json.loads(plan.to_json())
    del old["directions"]  # not a field then
    old["settings"] = {"lr": 1.0, "workers": 8, "storage": "journal:/elsewhere"}  # how it was run then
    study.set_user_attr("plan", old)
    study.set_user_attr("ready", True)
    plan.priority = 3  # scheduling only: not part of the study
    run_studies([plan], storage=url, workers=1, progress=False)  # resumes it, no error
    assert len(complete(optuna.load_study(study_name="o", storage=storage))) == 2


def test_report_only_draws_stored_studies_without_running_and_names_who_ran_them(tmp_path):
    url = f"journal:{tmp_path / 'p.journal'}"
    plan = StudyPlan("part", TOY, {}, {"sleep": 0.0}, "random", 0, 3)
    run_studies([plan], storage=url, workers=1, progress=False)
    other = StudyPlan("other", TOY, {}, {"sleep": 0.0}, "random", 0, 3)
    with pytest.raises(ValueError, match=r"report_only: no stored study \['other'\]"):
        run_studies([other], storage=url, report_only=True)
    longer = StudyPlan("part", TOY, {}, {"sleep": 0.0}, "random", 0, 6)  # as if cut off after 3 of 6
    study = run_studies([longer], storage=url, report_only=True)["part"]
    assert len(complete(study)) == 3  # nothing ran
    prov = search.trial_provenance([study])
    me = identity(0)
    assert prov["trials"] == 3 and prov["commits"] == {me["commit"] or "unrecorded": 3}
    assert prov["devices"] == {me["device"]: 3} and prov["hosts"] == {me["host"]: 3}


def test_storage_paths_given_on_the_command_line_are_made_absolute(tmp_path):
    from labkit.search.storage import absolute_url
    assert absolute_url("journal:figures/lab2/s.journal", tmp_path) == f"journal:{tmp_path}/figures/lab2/s.journal"
    assert absolute_url("sqlite:///x.db", tmp_path) == f"sqlite:///{tmp_path}/x.db"
    assert absolute_url("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert absolute_url("postgresql://h/db", tmp_path) == "postgresql://h/db"
    plan = StudyPlan("none", TOY, {}, {}, "random", 0, 1)
    with pytest.raises(ValueError, match="report_only: no journal file"):
        run_studies([plan], storage=f"journal:{tmp_path / 'missing.journal'}", report_only=True)
    assert not (tmp_path / "missing.journal").exists()  # looking did not create it


def test_shown_url_hides_project_paths_and_passwords():
    from labkit import settings
    from labkit.search.storage import shown_url
    assert shown_url(f"journal:{settings.REPO_ROOT}/figures/lab2/s.journal") == "journal:figures/lab2/s.journal"
    assert shown_url("postgresql://me:secret@db-host/optuna") == "postgresql://me:***@db-host/optuna"
    assert shown_url("journal:/elsewhere/x.journal") == "journal:/elsewhere/x.journal"


def test_resumed_grid_queues_points_that_failed_before_retries_existed(tmp_path):
    # A journal from before out-of-memory points were queued again: a grid point failed with nothing after
    # it (the committed Lab 2 studies hold two). Resuming must run that point, not end with a hole or an error.
    grid = {"x": [1, 2, 3], "y": ["a"]}
    url = f"journal:{tmp_path / 'old.journal'}"
    plan = StudyPlan("grid", TOY, {}, {"sleep": 0.0}, "grid", 0, 3, grid=grid)
    store = search.make_storage(url)
    search.worker.ensure_study(store, plan)
    study = optuna.load_study(study_name="grid", storage=store)
    old = study.ask()  # takes a queued point and fails it, as the old worker did, leaving no retry
    study.tell(old, state=TrialState.FAIL)
    assert len(search.worker.errors_of(study)) == 1
    done = run_studies([plan], storage=url, workers=1, progress=False)["grid"]
    xs = sorted(t.params["x"] for t in complete(done))
    assert xs == [1, 2, 3]
    assert search.worker.errors_of(done) == []  # the failed trial's retry stands for it
    retry = [t for t in done.trials if t.user_attrs.get("retry_of") == old.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE


def test_search_deadline_is_read_from_the_environment_with_clear_errors(monkeypatch):
    from labkit.search.worker import DEADLINE_ENV, search_deadline

    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    assert search_deadline() is None
    monkeypatch.setenv(DEADLINE_ENV, "1795700000")
    assert search_deadline() == 1795700000.0
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv(DEADLINE_ENV, bad)
        with pytest.raises(ValueError, match=f"{DEADLINE_ENV}=.*allowed values are Unix times"):
            search_deadline()


def test_workers_stop_between_trials_at_the_deadline_and_the_search_resumes(tmp_path, monkeypatch):
    from labkit.search.run import SearchStopped
    from labkit.search.worker import DEADLINE_ENV

    url = f"journal:{tmp_path / 'd.journal'}"
    plan = StudyPlan("deadline", TOY, {}, {"sleep": 0.4}, "random", 0, 12)
    # the first trials start (no median yet); once one has finished, a trial that would end past the deadline
    # is not started, so the search stops short, between trials, with a resumable error
    monkeypatch.setenv(DEADLINE_ENV, f"{time.time() + 1.0:.3f}")
    with pytest.raises(SearchStopped, match="stopped at LABKIT_SEARCH_DEADLINE.*run the same search again"):
        run_studies([plan], storage=url, workers=1, progress=False)
    study = optuna.load_study(study_name="deadline", storage=search.make_storage(url))
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert 1 <= states.count(TrialState.COMPLETE) < 12
    assert TrialState.RUNNING not in states and TrialState.FAIL not in states  # none cut in the middle
    kept = states.count(TrialState.COMPLETE)
    # past the deadline no trial starts at all
    monkeypatch.setenv(DEADLINE_ENV, f"{time.time() - 1:.3f}")
    with pytest.raises(SearchStopped):
        run_studies([plan], storage=url, workers=1, progress=False)
    assert len(complete(optuna.load_study(study_name="deadline", storage=search.make_storage(url)))) == kept
    # without one, the same search resumes and finishes: the trials done before count
    monkeypatch.delenv(DEADLINE_ENV)
    study = run_studies([plan], storage=url, workers=1, progress=False)["deadline"]
    assert len(complete(study)) == 12 and len(study.trials) == 12


def test_no_worker_starts_where_the_deadline_leaves_no_room_for_start_up_and_a_trial(tmp_path, monkeypatch):
    from labkit.search import run as R
    from labkit.search.worker import DEADLINE_ENV

    url = f"journal:{tmp_path / 'n.journal'}"
    store = search.make_storage(url)
    before = optuna.create_study(storage=store, study_name="task1")  # a finished neighbour: 30 s trials
    for _ in range(3):
        t = before.ask()
        t.set_user_attr("trial_seconds", 30.0)
        before.tell(t, 1.0)
    plan = StudyPlan("task2", TOY, {}, {"sleep": 0.0}, "random", 0, 4)  # new: no median of its own
    launched = []

    def launch(*args, **kwargs):
        launched.append(args)
        raise LookupError("launched")

    monkeypatch.setattr(R, "launch", launch)
    monkeypatch.setattr(R, "prepare", lambda plans: None)
    monkeypatch.setenv(DEADLINE_ENV, f"{time.time() + R.WORKER_START_S + 20:.3f}")  # < start-up + 30 s
    with pytest.raises(R.SearchStopped, match=r"task2 not started: \d+ s before LABKIT_SEARCH_DEADLINE"
                                              r".*one trial \(30 s"):
        run_studies([plan], storage=url, workers=2, progress=False)
    assert launched == []  # nothing was launched to find no room
    monkeypatch.setenv(DEADLINE_ENV, f"{time.time() + R.WORKER_START_S + 40:.3f}")  # room: the workers start
    with pytest.raises(LookupError, match="launched"):
        run_studies([plan], storage=url, workers=2, progress=False)
    assert len(launched) == 1


def test_a_worker_that_saw_room_stands_down_when_earlier_trials_fill_the_study(tmp_path, monkeypatch):
    # the race: a worker saw room, but others asked the study's last trials before it asked its own
    from labkit.search import worker as W

    url = f"journal:{tmp_path / 's.journal'}"
    plan = StudyPlan("stale", TOY, {}, {"sleep": 0.0}, "random", 0, 2)
    store = search.make_storage(url)
    W.ensure_study(store, plan)
    study = optuna.load_study(study_name="stale", storage=store)
    for _ in range(2):  # running in a live process (this one): not reaped
        study.ask().set_user_attr(WORKER_ATTR, identity(0))
    views = iter([("room", {"running": 0}), ("done", {"running": 0})])
    monkeypatch.setattr(W, "plan_state", lambda plan, study: next(views))
    W.Worker([plan], url, worker=1).run()
    trials = optuna.load_study(study_name="stale", storage=store).trials
    assert len(trials) == 3 and trials[2].state == TrialState.FAIL
    assert trials[2].user_attrs["failed_because"].startswith("surplus") and "x" not in trials[2].params


def test_a_trial_is_surplus_only_when_earlier_ones_fill_the_study(tmp_path):
    from labkit.search.worker import surplus

    study = optuna.create_study(storage=search.make_storage(f"journal:{tmp_path / 'u.journal'}"), study_name="u")
    done = study.ask()
    study.tell(done, 1.0)
    running = [study.ask() for _ in range(3)]  # numbers 1, 2, 3
    assert not surplus(study, running[0].number, 3)   # 1 finished ahead of it
    assert not surplus(study, running[1].number, 3)   # 1 finished + trial 1
    assert surplus(study, running[2].number, 3)       # 1 finished + trials 1 and 2 fill 3
    assert surplus(study, running[0].number, 1)

"""Four processes start one study on one new storage at the same instant, as workers started together from
several terminals do (``search.run_study(..., storage=URL)``: open the storage, create or load the study);
used by tests/search/test_storage_race.py (SQLite) and tests/search/test_search_postgres.py.

The processes are forked from one fresh process that has imported labkit.search once (an interpreter per
process would spend ~7 s importing torch and transformers, each; the test process itself may run threads,
which fork must not copy), and wait at a barrier, so they open the storage together."""
import multiprocessing as mp
import queue
import traceback

N_PROCS = 4
GRID = {"x": [0, 1, 2, 3]}  # one point per process, queued once by whichever creates the study


def _start(url, barrier, results):
    try:
        import optuna

        from labkit.search import StudyPlan, make_storage, worker

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        plan = StudyPlan("race", "in-process", {}, sampler="grid", n_trials=len(GRID["x"]), grid=GRID)
        barrier.wait(timeout=120)
        study = worker.ensure_study(make_storage(url), plan)  # what run_study does before its first trial
        queued = sorted(t.system_attrs["fixed_params"]["x"] for t in study.trials)
        results.put(("ok", (study.user_attrs.get("ready"), queued)))
    except BaseException:  # a crash on start is what the test counts: report it, whatever it is
        results.put(("crash", traceback.format_exc()))


def race(urls: list[str]) -> tuple[list[str], list[str]]:
    """Start the study on each of ``urls`` (each a new storage) from N_PROCS processes at once; returns
    (crashes, wrong results): tracebacks, and what a process saw when it was not the study ready with every
    grid point queued exactly once."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    coordinator = ctx.Process(target=_coordinate, args=(urls, out))
    coordinator.start()
    try:
        return out.get(timeout=600)
    finally:
        coordinator.join(timeout=30)


def _coordinate(urls, out):
    try:
        out.put(_race(urls))
    except BaseException:
        out.put(([traceback.format_exc()], []))


def _race(urls):
    import optuna

    import labkit.search  # noqa: F401  (imported once, here, for every forked process)

    optuna.storages.RDBStorage("sqlite://")  # also SQLAlchemy's and alembic's lazy imports (0.5 s)
    ctx = mp.get_context("fork")
    crashes, wrong = [], []
    for url in urls:
        barrier, results = ctx.Barrier(N_PROCS), ctx.Queue()
        procs = [ctx.Process(target=_start, args=(url, barrier, results)) for _ in range(N_PROCS)]
        for p in procs:
            p.start()
        for p in procs:
            try:
                status, what = results.get(timeout=180)
            except queue.Empty:
                status, what = "crash", f"{url}: a process reported nothing within 180 s"
            if status == "crash":
                crashes.append(what)
            elif what != (True, GRID["x"]):
                wrong.append(f"{url}: a process saw (ready, queued) = {what}, not (True, {GRID['x']})")
        for p in procs:
            p.join(timeout=30)
            if p.exitcode != 0:
                crashes.append(f"{url}: a process exited with {p.exitcode}")
    return crashes, wrong

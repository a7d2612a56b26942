"""Run studies with N worker processes per visible GPU on one shared storage, and report progress.

The launcher only starts workers and watches the storage: which trial runs where is decided by the
workers through Optuna's storage (see ``worker``), so workers started by hand on other machines
(``labkit search worker``) join the same studies. One worker on a CPU-only machine runs in this process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna

from .. import settings as _settings
from ..settings import visible_gpus
from . import host_wait, mps as _mps
from .plan import IN_PROCESS, StudyPlan, prepare
from .progress import SearchProgress
from .storage import default_url, make_storage, requeue_lost
from .worker import DEADLINE_ENV, Worker, release_gpu_memory, ensure_study, errors_of, plan_state, search_deadline

# Trial processes per GPU when ``workers="auto"``: small models leave one process's GPU mostly idle
# (benchmarks/search/search_throughput.py measures the curve; benchmarks/README.md states it).
WORKERS_PER_GPU = 8
# Under MPS (each worker limited to mps.SM_PERCENT of the SMs) more workers keep the GPU busier: 16 measured
# 40.5-40.7 trials/min against 12's 38.6 (Lab 2 full, H100; measured: benchmarks/search/search_throughput.json);
# GPU memory still caps it (worker_gib: 14 such workers on an 80 GB card).
WORKERS_PER_GPU_MPS = 16


# GPU memory one worker may need at its peak: each notebook search's ``worker_gib`` (``labkit.records``);
# LABKIT_WORKER_GIB overrides. Objectives of no notebook search get the largest.
FREE_SHARE = 0.9  # of the free memory: the allocators' fragmentation and CUDA contexts need the rest
# The workers' allocator, unless the user set one: a Lab 2 trial alone on an H100 held 4.2 GiB of tensors at its
# peak but reserved 75.9 GiB with fixed segments (evaluations of ragged batch shapes fragment them), 9.5 GiB with
# expandable ones, at the same accuracy and time (benchmarks/search/trial_memory.json); a worker's reserve is
# what the others sharing the GPU cannot have.
ALLOC_CONF = "expandable_segments:True"


def worker_gib(plans: list[StudyPlan] | None = None) -> float:
    value = _settings.env_number("LABKIT_WORKER_GIB", "numbers > 0 (GiB per worker)")
    if value is not None:
        return value
    from .. import records

    gib = {name: s.worker_gib for name, s in records.searches().items()}
    names = {p.objective for p in plans or []}
    return max((gib.get(n, max(gib.values())) for n in names), default=max(gib.values()))


def memory_fit(per_worker_gib: float, free_bytes: list[int]) -> list[int]:
    """How many workers of ``per_worker_gib`` fit in each GPU's free memory (``FREE_SHARE`` of it)."""
    return [int(free * FREE_SHARE // (per_worker_gib * 2**30)) for free in free_bytes]


def free_gpu_memory() -> list[int]:
    """Free bytes on each visible GPU, as the driver reports them (other processes' use included)."""
    import torch

    return [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]


AUTO = "auto"  # the one spelling of "as many workers as the machine holds"


def check_workers(workers, key: str = "workers"):
    """``workers`` as the search engine takes it: ``"auto"`` or an integer >= 1; else an error naming ``key``."""
    if workers != AUTO and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"{key}={workers!r}: allowed values are 'auto' or an integer >= 1")
    return workers


def normalise_workers(workers, key: str = "workers"):
    """A worker count as a person gives it (a profile override, a notebook's OVERRIDES), checked and in the one
    spelling: 0 and None, which meant "auto" in older profiles and settings, are read as ``"auto"``."""
    if workers is None or (type(workers) is int and workers == 0):
        workers = AUTO
    return check_workers(workers, key)


def resolve_workers(workers: int | str = "auto", per_gpu: int = WORKERS_PER_GPU, plans=None) -> int:
    """``auto``: ``per_gpu`` per visible GPU, as many as its free memory holds at ``worker_gib(plans)``
    each (``worker_gib``: the notebook searches' records); 1 on a CPU-only machine (its cores are one trial's). A
    number is taken as given, with a warning where the GPUs' free memory holds fewer such workers."""
    check_workers(workers)
    gpus = visible_gpus()
    if not gpus:
        return 1 if workers == AUTO else workers
    need = worker_gib(plans)
    free = free_gpu_memory()
    fit = memory_fit(need, free)
    if workers == AUTO:
        n = sum(min(per_gpu, f) for f in fit)
        if n < 1:
            raise RuntimeError(f"not enough free GPU memory for one search worker: each needs about {need:g} GiB "
                               f"(LABKIT_WORKER_GIB), free: {', '.join(f'{b / 2**30:.1f} GiB' for b in free)}")
        if n < per_gpu * len(fit):
            print(f"[labkit] {n} search workers, not {per_gpu * len(fit)}: the GPUs' free memory "
                  f"({', '.join(f'{b / 2**30:.1f}' for b in free)} GiB) holds {n} at about {need:g} GiB each",
                  file=sys.stderr, flush=True)
        return n
    if workers > sum(fit):
        print(f"[labkit] warning: {workers} search workers at about {need:g} GiB each may not fit the GPUs' free "
              f"memory ({', '.join(f'{b / 2**30:.1f}' for b in free)} GiB holds {sum(fit)}); an out-of-memory "
              "trial is queued again, never lost", file=sys.stderr, flush=True)
    return workers


def _die_with_parent():  # runs in the child before exec: no orphaned workers if the notebook dies
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launch(plans: list[StudyPlan], url: str, workers: int, log_dir: Path, first_worker: int = 0,
           extra_env: dict | None = None) -> list[tuple[subprocess.Popen, Path]]:
    """Start ``workers`` processes (``python -m labkit.search``), spread round-robin over the
    visible GPUs; returns (process, log file) pairs."""
    host_wait.mode({**os.environ, **(extra_env or {})})  # a bad LABKIT_CUDA_WAIT fails here, not in every worker
    log_dir.mkdir(parents=True, exist_ok=True)
    plan_file = log_dir / "plans.json"
    plan_file.write_text(json.dumps([json.loads(p.to_json()) for p in plans], indent=1))
    gpus = visible_gpus()
    threads = max(1, (os.cpu_count() or 1) // workers)
    procs = []
    for i in range(first_worker, first_worker + workers):
        env = {**os.environ, **(extra_env or {}), "OMP_NUM_THREADS": str(threads),
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
               # inductor's compile pool would start a process per core in every worker: compile inline
               "TORCHINDUCTOR_COMPILE_THREADS": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1")}
        env.setdefault("PYTORCH_CUDA_ALLOC_CONF", ALLOC_CONF)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
        log = log_dir / f"worker{i}.log"
        with open(log, "ab") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "labkit.search", "--plans", str(plan_file),
                                     "--storage", url, "--worker", str(i), "--threads", str(threads)],
                                    stdout=fh, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
        procs.append((proc, log))
    return procs


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_studies(plans: list[StudyPlan], storage: str | None = None, workers: int | str = "auto",
                progress: bool | str = True, desc: str = "search", objectives: dict | None = None,
                mps: bool | str = False, poll: float | None = None, log_dir: Path | None = None,
                first_worker: int = 0, report_only: bool = False) -> dict[str, optuna.Study]:
    """Run every plan to completion; returns ``{name: study}``.

    ``storage``: ``journal:PATH`` (default ``runs/optuna/<first study>.journal``) or an RDB URL.
    ``workers``: processes in all (``auto``: ``WORKERS_PER_GPU`` per visible GPU, ``WORKERS_PER_GPU_MPS``
    under MPS, 1 on a CPU). One worker runs in this process (``objectives`` may then give callables by study
    name); more run as processes that rebuild each objective from its plan. ``mps``: run the workers under a private CUDA MPS daemon
    so their small kernels share the GPU instead of taking turns (True/"on", False/"off" or "auto": see
    ``mps.wanted``). ``first_worker``: the id of the first worker here (give each machine its own range,
    so their sampler seeds differ). ``report_only``: run
    nothing, return the studies as stored (finished or not: e.g. to draw a GPU machine's studies on a
    laptop); an error if one was never started.
    """
    if not plans:
        raise ValueError("run_studies: no plans given")
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise ValueError(f"run_studies: duplicate study names {sorted({n for n in names if names.count(n) > 1})}")
    url = storage or default_url(plans[0].name.split("-")[0])
    if report_only and isinstance(url, str) and url.startswith("journal:") and not Path(url[8:]).is_file():
        raise ValueError(f"report_only: no journal file {url[8:]!r}; run the search first, or point `storage` "
                         "at the one that ran it")
    store = make_storage(url)
    if report_only:
        return stored_studies(plans, store)
    check_workers(workers)
    if objectives and workers not in (AUTO, 1):
        raise ValueError("in-process objectives run with workers=1; give plans (registered objectives) for more")
    # more than one: resolved once the launcher has handed its GPU memory back (sized to what is free)
    n = 1 if objectives or workers == 1 or (workers == AUTO and not visible_gpus()) else None
    for plan in plans:  # created here, once, before any worker starts
        ensure_study(store, plan)
        if plan.queue_only:
            lost = requeue_lost(optuna.load_study(study_name=plan.name, storage=store))
            if lost:
                print(f"[labkit] {plan.name}: failed points of trials {lost} queued again", file=sys.stderr, flush=True)
    # a search resumed after it finished (a regeneration's next call) starts no daemon and no workers: they would
    # each import torch and the data only to find nothing to run
    finished = all(plan_state(p, optuna.load_study(study_name=p.name, storage=store))[0] == "done" for p in plans)
    bar = SearchProgress(plans, store, desc=desc, progress=progress)
    try:
        if n is None and not finished:
            if not isinstance(url, str):
                raise ValueError("workers > 1 need a storage URL (journal:PATH or an RDB URL), not an object")
            _stop_if_no_room(plans, store)
            prepare(plans)
            # the launching notebook's cached GPU blocks (its own training and evaluation: 13.7 GiB in a
            # full-profile Lab 3 run) would sit idle beside the workers that need them
            release_gpu_memory()
            mps = _mps.wanted(mps)  # decided once: it sets how many workers "auto" starts
            n = resolve_workers(workers, per_gpu=WORKERS_PER_GPU_MPS if mps else WORKERS_PER_GPU, plans=plans)
        if finished:
            bar.update(force=True)
        elif n == 1:
            Worker(plans, store, worker=first_worker, objectives=objectives, on_trial=bar.update).run()
        else:
            _run_processes(plans, url, n, bar, poll if poll is not None else 5.0, mps, log_dir, first_worker)
    finally:
        bar.close()
    out = {}
    for plan in plans:
        study = optuna.load_study(study_name=plan.name, storage=store)
        state, c = plan_state(plan, study)
        if state != "done":
            deadline = search_deadline()
            if deadline is not None and time.time() + 1 >= deadline - _worker_margin(plans, store):
                raise SearchStopped(f"study {plan.name!r} stopped at {DEADLINE_ENV} ({c}): its finished trials are "
                                    "stored; run the same search again to resume it")
            raise RuntimeError(f"study {plan.name!r} is not finished ({c}); the workers stopped early")
        failed = errors_of(study)
        if plan.queue_only and failed:  # each queued point runs once: a failed one is a hole in the grid
            raise RuntimeError(f"study {plan.name!r}: {len(failed)} of its queued points failed; the last error: "
                               f"{failed[-1].user_attrs.get('error', '(not recorded)')}")
        out[plan.name] = study
    return out


class SearchStopped(RuntimeError):
    """The workers stopped between trials at ``$LABKIT_SEARCH_DEADLINE``; the study resumes when run again."""


# seconds from launching worker processes to their first trials (each imports torch and the data): 24 s for Lab 2's
# Task 2 on an H200 host (the fresh regeneration's call 6)
WORKER_START_S = 25.0


def _stop_if_no_room(plans: list[StudyPlan], store) -> None:
    """SearchStopped before any worker starts where ``$LABKIT_SEARCH_DEADLINE`` leaves less than the workers' start-up
    and one trial (the plans' longest median trial time, else the longest of every study in the storage: a new
    study's trials are like its neighbours'). Workers launched so late would only find that no trial fits (Lab 2's
    Task 2 started 20 s before its deadline in a regeneration: 63 s of the call for 2 trials)."""
    from .worker import expected_trial_seconds

    deadline = search_deadline()
    if deadline is None:
        return
    trial = _worker_margin(plans, store) or max(
        (expected_trial_seconds(optuna.load_study(study_name=s.study_name, storage=store))
         for s in optuna.get_all_study_summaries(store, include_best_trial=False)), default=0.0)
    left = deadline - time.time()
    if left < WORKER_START_S + trial:
        raise SearchStopped(f"{', '.join(p.name for p in plans)} not started: {max(left, 0):.0f} s before "
                            f"{DEADLINE_ENV}, less than the workers' start-up ({WORKER_START_S:.0f} s) and one trial "
                            f"({trial:.0f} s, the stored median); its finished trials are stored; run the same search "
                            "again to resume it")


def _worker_margin(plans: list[StudyPlan], store) -> float:
    """The longest of the plans' median trial times: a worker stops that long before the deadline."""
    from .worker import expected_trial_seconds

    return max((expected_trial_seconds(optuna.load_study(study_name=p.name, storage=store)) for p in plans),
               default=0.0)


def stored_studies(plans: list[StudyPlan], storage) -> dict[str, optuna.Study]:
    """The plans' studies as stored, without running a trial."""
    store = make_storage(storage)
    have = {s.study_name for s in optuna.get_all_study_summaries(store, include_best_trial=False)}
    missing = [p.name for p in plans if p.name not in have]
    if missing:
        raise ValueError(f"report_only: no stored study {missing} in this storage (stored: {sorted(have)}); "
                         "run the search first, or point `storage` at the one that ran it")
    return {p.name: optuna.load_study(study_name=p.name, storage=store) for p in plans}


def _run_processes(plans, url, n, bar, poll, mps, log_dir, first_worker):
    log_dir = Path(log_dir or _settings.runs_dir() / "optuna" / "logs" / plans[0].name)
    with _mps.daemon(log_dir / "mps", enabled=mps) as env:
        env = {**env, **host_wait.worker_env(bool(mps))}
        procs = launch(plans, url, n, log_dir, first_worker=first_worker, extra_env=env)
        crashed = set()
        try:
            while True:
                alive = [p for p, _ in procs if p.poll() is None]
                for p, log in procs:
                    if p.poll() not in (None, 0) and p.pid not in crashed:
                        crashed.add(p.pid)
                        print(f"[labkit] worker pid {p.pid} exited with {p.returncode}; the others carry on. "
                              f"Its log ({log}):\n{_tail(log)}", file=sys.stderr, flush=True)
                if not alive:
                    break
                time.sleep(poll)
                bar.update()
        finally:
            for p, _ in procs:
                if p.poll() is None:
                    p.terminate()
            for p, _ in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
    if len(crashed) == len(procs):
        raise RuntimeError("every worker exited with an error; the first one's log:\n" + _tail(procs[0][1], 40))


def run_study(name: str, objective, n_trials: int, sampler: str = "tpe", seed: int = 0, storage=None,
              search_space: dict | None = None, progress: bool | str = True, workers: int | str = 1,
              settings: dict | None = None, options: dict | None = None, enqueue: list | None = None,
              mps: bool | str = False) -> optuna.Study:
    """Create or load study ``name`` and run it until ``n_trials`` trials have finished.

    ``objective``: a callable (runs in this process, one worker) or a registered objective name such
    as ``"lab2"`` built from ``settings`` and ``options`` in each worker. Finished trials from earlier
    (killed) runs count, so calling this again resumes.
    """
    in_process = callable(objective)
    plan = StudyPlan(name=name, objective=IN_PROCESS if in_process else objective, settings=settings or {},
                     options=options or {}, sampler=sampler, seed=seed, n_trials=n_trials,
                     grid=search_space if sampler == "grid" else None, enqueue=list(enqueue or []))
    studies = run_studies([plan], storage=storage, workers=1 if in_process else workers, progress=progress,
                          desc=name, objectives={name: objective} if in_process else None, mps=mps)
    return studies[name]

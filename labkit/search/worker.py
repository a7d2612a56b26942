"""A trial worker: runs trials of a list of study plans against shared storage until they are done.

Many workers (processes, here or on other machines) may run the same plans at once; Optuna's storage is
the only thing they share: no scheduler. A worker takes, each time, a study that still has room (the highest
priority, then the fewest running trials, so concurrent workers spread over studies of equal priority; see
``pick``), runs one trial there, and stops when
every study is done. ``python -m labkit.search --plans FILE --storage URL --worker N`` runs one.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

import optuna
from optuna.trial import TrialState

from .. import settings as _settings
from . import cache as _cache
from . import host_wait
from .plan import StudyPlan, build_objective
from .samplers import make_sampler, worker_seed
from .storage import WORKER_ATTR, counts, identity, make_storage, reap_stale, requeue, retried
from .samplers import grid_order

log = logging.getLogger("labkit.search")
READY_TIMEOUT_S = 120
PLAN_GRACE_S = 20  # a new study's creator stores its plan within milliseconds, unless the storage is busy
OOM_WAIT_S = 600  # the longest a worker waits, after an out-of-memory failure, for another trial to end


class QueueEmpty(Exception):
    """A queue-only study's last queued point was taken by another worker between our check and our ask."""


class Surplus(Exception):
    """Workers that saw room at the same moment asked more trials than the study has left: the later ones
    stand down before any work (without this, 14 workers resuming a study 2 trials short ran 11 trials)."""


def surplus(study: optuna.Study, number: int, n_trials: int) -> bool:
    """Whether trial ``number`` is beyond ``n_trials``: finished trials plus the running ones asked before it
    already fill the study."""
    ahead = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                or (t.state == TrialState.RUNNING and t.number < number) for t in study.get_trials(deepcopy=False))
    return ahead >= n_trials


# A Unix time (seconds) after which no trial should still be running: a worker starts a trial only where the
# study's median trial time ends before it. A search lent a fixed slot (labkit regenerate's calls) then stops
# between trials instead of being killed in them: a killed trial is lost work, and its retries, all queued at
# once when the search resumes, crowded the GPU into out-of-memory failures (Lab 2 on an H100).
DEADLINE_ENV = "LABKIT_SEARCH_DEADLINE"


def search_deadline() -> float | None:
    """``$LABKIT_SEARCH_DEADLINE`` as a Unix time, or None when unset."""
    return _settings.env_number(DEADLINE_ENV, "Unix times in seconds (> 0), or unset")


def expected_trial_seconds(study: optuna.Study) -> float:
    """The median ``trial_seconds`` of the study's finished trials (0 before any: the first trial starts)."""
    done = sorted(float(t.user_attrs["trial_seconds"]) for t in study.get_trials(deepcopy=False,
                  states=(TrialState.COMPLETE,)) if isinstance(t.user_attrs.get("trial_seconds"), (int, float)))
    return done[len(done) // 2] if done else 0.0


def ensure_study(storage, plan: StudyPlan) -> optuna.Study:
    """Create ``plan``'s study (storing the plan, queueing grid points and ``enqueue``) or load it.

    Exactly one process creates a study (Optuna's storage refuses a duplicate name), and only it queues
    points, so they are queued once however many workers start together. A study created with another
    plan is an error, not silently reused.
    """
    try:
        study = optuna.create_study(study_name=plan.name, storage=storage, directions=plan.directions)
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=plan.name, storage=storage)
        start = time.time()
        while not study.user_attrs.get("ready"):
            # its creator (another process that started with us) may not have stored the plan yet; a study
            # with trials, or still without a plan after a grace, was made by other code: used as it is
            if "plan" not in study.user_attrs and (study.trials or time.time() > start + PLAN_GRACE_S):
                break
            if time.time() > start + READY_TIMEOUT_S:
                raise RuntimeError(f"study {plan.name!r}: its creator never finished queueing its points")
            time.sleep(0.2)
            study = optuna.load_study(study_name=plan.name, storage=storage)
        stored = study.user_attrs.get("plan")
        if stored is not None:
            _check_same_plan(plan, stored)
        return study
    study.set_user_attr("plan", json.loads(plan.to_json()))
    study.set_user_attr("sampler", plan.sampler)
    if plan.sampler == "grid":
        for params in grid_order(plan.grid, plan.seed)[: plan.n_trials]:
            study.enqueue_trial(params)
    for params in plan.enqueue:
        study.enqueue_trial(params, user_attrs={"enqueued": True})
    study.set_user_attr("ready", True)
    return study


def _check_same_plan(plan: StudyPlan, stored: dict) -> None:
    mine = plan.identity()
    try:  # a plan stored by an older labkit lacks newer fields: their defaults apply
        theirs = StudyPlan(**{**stored, "objective": plan.objective}).identity()
        theirs["objective"] = stored.get("objective")
    except (TypeError, ValueError, KeyError):
        theirs = stored
    differ = sorted(k for k in mine if mine[k] != theirs.get(k))
    if differ:
        raise ValueError(f"study {plan.name!r} exists in this storage with a different plan (keys {differ}); "
                         "use another study name or storage")
    if plan.queue_only and plan.n_trials != stored.get("n_trials"):
        raise ValueError(f"study {plan.name!r}: a grid study's n_trials is fixed when its points are queued "
                         f"({stored.get('n_trials')}), got {plan.n_trials}")


def plan_state(plan: StudyPlan, study: optuna.Study) -> tuple[str, dict]:
    """``("room" | "wait" | "done", counts)`` after failing dead workers' trials."""
    reap_stale(study)
    c = counts(study)
    finished = c["complete"] + c["pruned"]
    if plan.queue_only:
        state = "room" if c["waiting"] else "wait" if c["running"] else "done"
    elif finished >= plan.n_trials:
        state = "done"
    else:
        state = "room" if finished + c["running"] < plan.n_trials else "wait"
    return state, c


def errors_of(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials that failed in their objective (not those of dead workers or lost queue races)."""
    again = retried(study)  # a point queued again is not lost: its retry stands for it
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
            if "failed_because" not in t.user_attrs and t.number not in again]


def _out_of_memory(err: BaseException) -> bool:
    return type(err).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(err)


def release_gpu_memory() -> None:
    """Hand cached GPU blocks back after each trial: several workers share one GPU, and one worker's
    cache of a big model's peak would otherwise starve the others into out-of-memory errors."""
    torch = sys.modules.get("torch")  # only if a trial imported it
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def pick(room: list[tuple[int, int, StudyPlan]]) -> StudyPlan:
    """The plan a free worker takes from ``(running trials, order, plan)`` rows of plans with room: the highest
    ``priority``, then the fewest running trials, then the plans' order."""
    return min(room, key=lambda r: (-r[2].priority, r[0], r[1]))[2]


class Worker:
    """Runs trials of ``plans``; ``objectives`` may give in-process callables by study name (no plan
    rebuild, for notebooks and tests)."""

    def __init__(self, plans: list[StudyPlan], storage, worker: int = 0, objectives: dict | None = None,
                 poll: float = 1.0, on_trial=None, deadline: float | None = None):
        self.plans, self.worker, self.poll, self.on_trial = plans, worker, poll, on_trial
        self.deadline = search_deadline() if deadline is None else deadline  # see DEADLINE_ENV
        self.storage = make_storage(storage)
        self.objectives = dict(objectives or {})
        self.results = _cache.ResultCache(self.storage)
        self.me = identity(worker)
        self._studies: dict[str, optuna.Study] = {}
        self.after_oom = False  # the last trial ran out of GPU memory: wait for room before the next

    def _study(self, plan: StudyPlan) -> optuna.Study:
        if plan.name not in self._studies:
            study = optuna.load_study(study_name=plan.name, storage=self.storage,
                                      sampler=optuna.samplers.RandomSampler())
            mine = sum(t.user_attrs.get(WORKER_ATTR, {}).get("worker") == self.worker
                       for t in study.get_trials(deepcopy=False))
            study.sampler = make_sampler(plan.sampler if not plan.queue_only else "random",
                                         worker_seed(plan.seed, self.worker, mine, plan.sampler), plan.grid,
                                         plan.n_trials)
            self._studies[plan.name] = study
        return self._studies[plan.name]

    def _objective(self, plan: StudyPlan):
        if plan.name not in self.objectives:
            self.objectives[plan.name] = build_objective(plan)
        objective = self.objectives[plan.name]
        if hasattr(objective, "cache"):
            objective.cache = self.results
        return objective

    def next_plan(self) -> StudyPlan | None | bool:
        """A plan with room (see ``pick``), False to wait, None when all are done."""
        room, waiting = [], False
        for order, plan in enumerate(self.plans):
            study = self._study(plan)
            state, c = plan_state(plan, study)
            if state == "room":
                room.append((c["running"], order, plan))
            elif state == "wait":
                waiting = True
            errors = errors_of(study)
            if len(errors) >= max(plan.n_trials, 5):
                raise RuntimeError(f"study {plan.name!r}: {len(errors)} trials failed; the last error: "
                                   f"{errors[-1].user_attrs.get('error', '(not recorded)')}")
        if room:
            return pick(room)
        return False if waiting else None

    def run_one(self, plan: StudyPlan) -> None:
        study, objective, storage = self._study(plan), self._objective(plan), self.storage

        def wrapped(trial: optuna.Trial) -> float:
            trial.set_user_attr(WORKER_ATTR, self.me)
            if plan.queue_only and "fixed_params" not in storage.get_trial(trial._trial_id).system_attrs:
                trial.set_user_attr("failed_because", "queue empty: another worker took the last queued point")
                raise QueueEmpty(plan.name)
            if not plan.queue_only and surplus(study, trial.number, plan.n_trials):
                # a sampled study needs no particular point: a retry taken here is not queued again
                trial.set_user_attr("failed_because", "surplus: earlier trials fill the study's n_trials")
                raise Surplus(plan.name)
            try:
                return objective(trial)
            except Exception as err:  # optuna keeps no reason: the trial says what failed it
                trial.set_user_attr("error", f"{type(err).__name__}: {err}"[:2000])
                # other workers' models filled the GPU: not the point's fault, so it runs again later
                # (past MAX_RETRIES it counts as the objective's error)
                if _out_of_memory(err):
                    self.after_oom = True
                    if requeue(study, storage.get_trial(trial._trial_id)):
                        trial.set_user_attr("failed_because", "CUDA out of memory (point queued again)")
                raise

        with warnings.catch_warnings():
            # optimize() warns that a caught exception failed a trial; the trial records it anyway
            warnings.simplefilter("ignore", UserWarning)
            study.optimize(wrapped, n_trials=1, catch=(RuntimeError, FloatingPointError, QueueEmpty, Surplus),
                           show_progress_bar=False)
        release_gpu_memory()
        if self.on_trial is not None:
            self.on_trial()

    def wait_for_a_finish(self, timeout: float = OOM_WAIT_S) -> None:
        """Return once another trial of these plans ends, none is running, or after ``timeout`` seconds: after
        an out-of-memory failure the GPU is full, and a trial started at once (the same point, queued again)
        would meet the same full GPU."""
        def ended_and_running():  # plan_state fails dead workers' trials: they count as ended
            c = [plan_state(plan, self._study(plan))[1] for plan in self.plans]
            return sum(x["complete"] + x["fail"] + x["pruned"] for x in c), sum(x["running"] for x in c)

        ended, running = ended_and_running()
        end = time.time() + timeout
        while running and time.time() < end:
            time.sleep(self.poll)
            now_ended, running = ended_and_running()
            if now_ended > ended:
                return

    def run(self) -> None:
        for plan in self.plans:
            ensure_study(self.storage, plan)
        while True:
            if self.after_oom:
                self.after_oom = False
                self.wait_for_a_finish()
            plan = self.next_plan()
            if plan is None:
                return
            if plan is False:
                time.sleep(self.poll)
                continue
            if self.deadline is not None and time.time() + expected_trial_seconds(self._study(plan)) > self.deadline:
                print(f"[labkit] worker {self.worker}: no new trial of {plan.name}: its median trial would end after "
                      f"{DEADLINE_ENV}", file=sys.stderr, flush=True)
                return
            self.run_one(plan)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.search", description=__doc__)
    parser.add_argument("--plans", required=True, help="JSON file: a list of StudyPlan objects")
    parser.add_argument("--storage", required=True, help="journal:PATH or an RDB URL")
    parser.add_argument("--worker", type=int, default=0, help="worker id (seeds this worker's samplers)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    print(f"[labkit] worker {args.worker}: {host_wait.apply()}", file=sys.stderr, flush=True)  # before CUDA's first use
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with open(args.plans) as fh:
        plans = [StudyPlan(**p) for p in json.load(fh)]
    Worker(plans, args.storage, worker=args.worker).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

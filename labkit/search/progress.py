"""Progress of running studies a person can follow: trials done of total, best so far, rate, time left.

In JupyterLab a tqdm widget (plain tqdm text elsewhere); under ``labkit run`` (papermill, which sets
``LABKIT_PROGRESS=lines``) one ``[labkit]`` line at most every ``every`` seconds, which the runner
echoes to its console.
"""
from __future__ import annotations

import time

import optuna
from tqdm.auto import tqdm

from ..training.progress import duration
from ..training.progress import mode as progress_mode
from .storage import counts


class SearchProgress:
    def __init__(self, plans, storage, desc: str = "search", progress: bool | str = True, every: float = 30.0):
        self.plans, self.storage, self.desc, self.every = plans, storage, desc, every
        self.mode = progress_mode(progress)  # the same LABKIT_PROGRESS as every labkit loop
        self.total = sum(p.n_trials for p in plans)
        self.start = time.time()
        self._first_done: int | None = None
        self._last_line = 0.0
        self.bar = tqdm(total=self.total, desc=desc, unit="trial", leave=True) if self.mode == "bar" else None

    def snapshot(self) -> dict:
        done = running = 0
        best = None
        for plan in self.plans:
            study = optuna.load_study(study_name=plan.name, storage=self.storage)
            c = counts(study)
            fin = c["complete"] + c["pruned"]
            done += min(fin, plan.n_trials) if not plan.queue_only else fin
            running += c["running"]
            single = len(study.directions) == 1  # a multi-objective study has a front, not a best value
            if c["complete"] and single and (best is None or study.best_value > best[0]):
                best = (study.best_value, plan.name)
        return {"done": done, "running": running, "best": best}

    def update(self, force: bool = False) -> dict:
        snap = self.snapshot()
        if self._first_done is None:
            self._first_done = snap["done"]  # resumed trials do not count towards the rate
        if self.bar is not None:
            self.bar.n = snap["done"]
            if snap["best"]:
                self.bar.set_postfix(best=f"{snap['best'][0]:.4f}", running=snap["running"], refresh=False)
            self.bar.refresh()
        elif self.mode == "lines" and (force or time.time() - self._last_line >= self.every):
            self._last_line = time.time()
            print(f"[labkit] {self.line(snap)}", flush=True)
        return snap

    def line(self, snap: dict) -> str:
        elapsed = time.time() - self.start
        new = snap["done"] - (self._first_done or 0)
        rate = new / elapsed * 60 if elapsed > 0 else 0.0
        text = f"{self.desc}: {snap['done']}/{self.total} trials, {snap['running']} running"
        if snap["best"]:
            text += f", best {snap['best'][0]:.4f} ({snap['best'][1]})"
        if new > 0:
            left = (self.total - snap["done"]) / rate * 60 if rate else 0
            text += f", {rate:.1f} trials/min, about {duration(left)} left"
        return text + f", {duration(elapsed)} so far"

    def close(self) -> None:
        snap = self.update(force=True)
        if self.bar is not None:
            self.bar.close()
        self.final = snap

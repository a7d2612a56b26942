"""Run a study in its own process for the kill/resume test: each trial sleeps, then records itself."""
import sys
import time

import optuna

from labkit import search

url, name, n_trials, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def objective(trial):
    x = trial.suggest_float("x", -3, 3)
    time.sleep(0.4)
    with open(log, "a") as fh:  # written only once the trial's work is done
        fh.write(f"{trial.number}\n")
    return -(x - 1) ** 2


optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = search.make_storage(url, heartbeat_interval=1, grace_period=2)
search.run_study(name, objective, n_trials, sampler="random", seed=0, storage=storage, progress=False)

"""A toy objective factory for the search-engine tests: importable by worker processes."""
import os
import time


def factory(settings, sleep=0.2, log=None, fail_x=None):
    def objective(trial):
        x = trial.suggest_int("x", 0, 49)
        y = trial.suggest_categorical("y", ["a", "b"])
        if fail_x is not None and x == fail_x:
            raise RuntimeError(f"x={x} fails on purpose")
        time.sleep(sleep)
        if log:
            with open(log, "a") as fh:  # written only once the trial's work is done
                fh.write(f"{os.getpid()} {trial.number} {x} {y}\n")
        return x / 50 + (0.01 if y == "b" else 0.0)
    return objective


def architecture(settings, sleep=0.2):
    """Samples a real Lab 2 architecture (no training): a score from its sizes."""
    from labkit.search import sample_architecture

    def objective(trial):
        arch = sample_architecture(trial)
        time.sleep(sleep)
        return arch["config"]["hidden_size"] / 1000
    return objective

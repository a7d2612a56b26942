"""A toy objective factory for the search-engine tests: importable by worker processes."""
import os
import time


class OutOfMemoryError(RuntimeError):
    """Named like torch's, which the worker recognises by name (it does not import torch)."""


def factory(settings, sleep=0.2, log=None, fail_x=None, oom_once=None):
    def objective(trial):
        x = trial.suggest_int("x", 0, 49)
        y = trial.suggest_categorical("y", ["a", "b"])
        if fail_x is not None and x == fail_x:
            raise RuntimeError(f"x={x} fails on purpose")
        if oom_once is not None and x == oom_once["x"] and not os.path.exists(oom_once["marker"]):
            open(oom_once["marker"], "w").close()  # the first attempt only: the GPU was full then
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 588.00 MiB (toy)")
        time.sleep(sleep)
        trial.set_user_attr("trial_seconds", sleep)  # as the labs' objectives record it (worker deadlines read it)
        if log:
            with open(log, "a") as fh:  # written only once the trial's work is done
                fh.write(f"{os.getpid()} {trial.number} {x} {y}\n")
        return x / 50 + (0.01 if y == "b" else 0.0)
    return objective


def architecture(settings, sleep=0.2):
    """Samples a real Lab 2 architecture (no training): a score from its sizes."""
    from labkit.labs.lab2_space import sample_architecture

    def objective(trial):
        arch = sample_architecture(trial)
        time.sleep(sleep)
        return arch["config"]["hidden_size"] / 1000
    return objective

"""Lab 2's remeasure runs its worker processes under the MPS daemon its settings ask for."""
import contextlib

import pytest

from _lab2_remeasure import task1_samplers
from labkit.labs import lab2_remeasure
from labkit.search import mps


class Entered(Exception):
    pass


def test_the_workers_start_under_the_settings_mps_mode(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    seen = {}

    @contextlib.contextmanager
    def daemon(folder, mode, share, clients):
        seen.update(mode=mode, share=share, folder=folder)
        raise Entered  # stop before any worker process starts

    monkeypatch.setattr(mps, "daemon", daemon)
    sides = {"best": {"params": {}, "trial": 0}, "runner_up": {"params": {}, "trial": 1}}
    monkeypatch.setattr(lab2_remeasure, "plan", lambda *a, **k: [{"what": "task1", "mode": "none", "sides": sides}])
    monkeypatch.setattr("labkit.recipes.prepare_data", lambda s: None)
    samplers = {"settings": {"seed": 0, "device": "cpu"}, "numbers": {}}
    with pytest.raises(Entered):
        lab2_remeasure.remeasure(samplers, None, k=2, workers=2, mps="auto")
    assert seen["mode"] == "auto" and seen["share"] == 100 and seen["folder"].parent.name == "lab2-remeasure"


def test_retrainings_split_over_worker_processes_give_the_sequential_numbers(monkeypatch, tmp_path):
    """One task per (seed, side): 2 seeds x 2 sides over 2 spawned processes (CPU, no MPS) give the numbers one
    process gives, each at its own seed and side."""
    from labkit.run.profiles import lab_settings

    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    s = {**lab_settings("lab2_search", "smoke"), "device": "cpu"}
    samplers = task1_samplers(s)
    one = lab2_remeasure.remeasure(samplers, None, k=2, workers=1)
    split = lab2_remeasure.remeasure(samplers, None, k=2, workers=2, mps="off")
    assert one["workers"] == 1 and split["workers"] == 2
    for side in ("best", "runner_up"):
        assert split["task1"][side]["accuracy"] == one["task1"][side]["accuracy"]
    assert one["task1"]["best"]["accuracy"] != one["task1"]["runner_up"]["accuracy"]  # not one side copied

"""Lab 2's remeasure runs its worker processes under the MPS daemon its settings ask for."""
import contextlib

import pytest

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
    monkeypatch.setattr(lab2_remeasure, "plan", lambda *a, **k: [])
    monkeypatch.setattr("labkit.recipes.prepare_data", lambda s: None)
    samplers = {"settings": {"seed": 0, "device": "cpu"}, "numbers": {}}
    with pytest.raises(Entered):
        lab2_remeasure.remeasure(samplers, None, k=2, workers=2, mps="auto")
    assert seen["mode"] == "auto" and seen["share"] == 100 and seen["folder"].parent.name == "lab2-remeasure"

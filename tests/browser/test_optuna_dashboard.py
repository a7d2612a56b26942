"""``labkit dashboard`` on Lab 2's study storage, opened in headless Chromium: the home page lists every
study and each study's trial list shows all its trials. Uses the smoke studies the Lab 2 notebook made in
JupyterLab earlier in this session (test_jupyterlab.py), else a small study made here."""
import os
import re
import select
import signal
import subprocess
import sys
import time

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage

pytestmark = pytest.mark.browser  # in conftest's "notebooks" process group: it reads the Lab 2 run's studies


def _toy_runs(folder):
    journal = folder / "optuna" / "lab2.journal"
    journal.parent.mkdir(parents=True)
    study = optuna.create_study(study_name="toy-smoke", direction="maximize", sampler=optuna.samplers.RandomSampler(0),
                                storage=JournalStorage(JournalFileBackend(str(journal))))
    study.optimize(lambda t: t.suggest_int("hidden_size", 128, 512) / 512, n_trials=4)
    return folder


def _start_dashboard(runs):
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "dashboard", "lab2", "--port", "0"],
                            env=dict(os.environ, LABKIT_RUNS_DIR=str(runs)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if select.select([proc.stdout], [], [], 1)[0]:
            line = proc.stdout.readline()
            if m := re.search(r"at (http://\S+/) ", line):
                return proc, line, m.group(1)
            if not line and proc.poll() is not None:
                break
    proc.kill()
    raise RuntimeError(f"labkit dashboard printed no URL (exit {proc.poll()})")


def test_dashboard_lists_every_trial_of_the_smoke_studies(page, lab, screenshots, tmp_path):
    runs = lab.runs if (lab.runs / "optuna" / "lab2.journal").is_file() else _toy_runs(tmp_path / "runs")
    storage = JournalStorage(JournalFileBackend(str(runs / "optuna" / "lab2.journal")))
    names = optuna.get_all_study_names(storage)
    assert names
    proc, line, url = _start_dashboard(runs)
    try:
        assert f"{len(names)} stud" in line and "lab2.journal" in line, line
        page.goto(url + "dashboard")
        for name in names:
            page.get_by_text(name).first.wait_for()
        page.screenshot(path=str(screenshots / "dashboard-studies.png"))
        for i, name in enumerate(names):
            sid = storage.get_study_id_from_name(name)
            trials = storage.get_all_trials(sid)
            # optuna-dashboard 0.21 shows trials in "Trials (List)"; its old table route renders nothing
            page.goto(f"{url}dashboard/studies/{sid}/trials")
            page.get_by_text(f"{len(trials)} Trials", exact=True).wait_for()
            for t in trials:
                assert page.get_by_text(f"Trial {t.number}", exact=True).count() >= 1, (name, t.number)
            if i == 0:
                page.screenshot(path=str(screenshots / "dashboard-trials.png"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)

"""The prose answers say what their numbers say: verdicts flip with the numbers, and every quoted number
is the input's."""
import math

import pytest

from labkit.answers import lab2_search as lab2
from labkit.narrate import lab2_search as narrate2, runs
from labkit.readings import tables
from labkit.search import band


def bands(finals: dict[str, list[float]], trials: int = 20) -> dict:
    # curves that end at the given finals (rising to them), one per seed
    return {name: band([[v - 0.01 * (trials - 1 - i) for i in range(trials)] for v in values])
            for name, values in finals.items()}


def test_accuracy_standard_error():
    assert tables.test_set_se(0.5, 100) == pytest.approx(0.05)
    assert tables.test_set_se(0.86, 25000) == pytest.approx(math.sqrt(0.86 * 0.14 / 25000))


def test_within_trial():
    trials = [{"accuracy_trained": 0.80, "accuracy_compressed": 0.75}, {"accuracy_trained": 0.82,
                                                                        "accuracy_compressed": 0.80}]
    eff = tables.within_trial(trials, "accuracy_compressed")
    assert eff == {"mean": pytest.approx(-0.035), "min": pytest.approx(-0.05), "max": pytest.approx(-0.02), "trials": 2}
    with pytest.raises(ValueError, match="no trial records both"):
        tables.within_trial(trials, "accuracy_post_trained")


def test_shortfall_names_only_unfinished_searches():
    assert narrate2.shortfall({"a": 20, "b": 20}, 20) == ""
    text = narrate2.shortfall({"grid-s1": 18, "tpe-s0": 20}, 20)
    assert "grid-s1 18" in text and "tpe-s0" not in text and "stop at 18 trials" in text


def test_bands_compare_samplers_at_the_shortest_search():
    from labkit.search import bands
    out = bands({"grid": [[0.5, 0.6, 0.7], [0.5, 0.6]], "tpe": [[0.4, 0.8, 0.9]]})
    assert out["grid"]["trials"] == out["tpe"]["trials"] == 2
    assert out["tpe"]["final"] == [0.8]


def test_drawn_from_names_commits_and_devices_or_says_they_were_not_recorded():
    sha = "f86ba3ed0b48b16af63f3bc4762fdd1d532c02d2"
    text = lab2.drawn_from({"trials": 3, "commits": {sha: 3}, "devices": {"NVIDIA H100": 3}, "hosts": {"h": 3}})
    assert "f86ba3e (3)" in text and "NVIDIA H100 (3)" in text and "not recorded" not in text
    text = lab2.drawn_from({"trials": 2, "commits": {sha: 2}, "devices": {"unrecorded": 2}, "hosts": {"h": 2}})
    assert "hosts h (2) (device not recorded" in text


def _study_with_workers(records: list[dict | None], sm_counts: list[int] | None = None):
    """An in-memory study with one completed trial per worker record (None: a trial that recorded none), each with
    the SM count of ``sm_counts`` where given."""
    import optuna
    from labkit.search.storage import WORKER_ATTR
    study = optuna.create_study(direction="maximize")
    for i, who in enumerate(records):
        attrs = ({WORKER_ATTR: who} if who else {}) | ({"gpu_sm_count": sm_counts[i]} if sm_counts else {})
        study.add_trial(optuna.trial.create_trial(value=0.5 + i / 100, user_attrs=attrs))
    return study


def test_how_trials_ran_counts_worker_processes_hosts_and_devices_from_the_trials():
    from labkit.search import trial_provenance
    boot = {"host": "gpu-a", "boot": "b1"}
    records = ([{**boot, "pid": 100 + w, "worker": w, "device": "NVIDIA H100"} for w in range(8)] * 2  # 2 each
               + [{**boot, "pid": 100, "worker": 0, "boot": "b2"}]  # same pid after a reboot: another process
               + [{"host": "gpu-b", "boot": "c", "pid": 100, "worker": 11}]  # same pid on another host
               + [None])
    prov = trial_provenance([_study_with_workers(records)])
    assert prov["trials"] == 19 and prov["processes"] == 10 and prov["boots"] == 3 and prov["unclaimed"] == 1
    assert prov["worker_ids"] == [0, 1, 2, 3, 4, 5, 6, 7, 11]
    text = runs.how_trials_ran(prov)
    assert text.startswith("The 19 completed trials ran in 10 worker processes (worker ids 0-7, 11) on 2 hosts "
                           "(gpu-a: 17 trials, gpu-b: 1 trial, over 3 boots)"), text
    assert "devices: NVIDIA H100 (16 trials), device not recorded (3 trials)" in text
    assert text.endswith("; 1 trial recorded no worker.")


def test_how_trials_ran_names_the_sms_each_trial_saw_where_trials_recorded_them():
    from labkit.search import trial_provenance
    records = [{"host": "h", "boot": "b", "pid": 7 + w, "worker": w, "device": "NVIDIA H200"} for w in range(3)]
    prov = trial_provenance([_study_with_workers(records, [32, 32, 132])])
    assert prov["sm_counts"] == {32: 2, 132: 1}
    text = runs.how_trials_ran(prov)
    assert "each trial's process saw: 32 (2 trials), 132 (1 trial) (fewer under an MPS share" in text
    assert text.endswith("trains other weights).")
    assert "multiprocessors" not in runs.how_trials_ran(trial_provenance([_study_with_workers(records)]))


def test_how_trials_ran_in_one_process_and_with_no_records():
    from labkit.search import trial_provenance
    one = runs.how_trials_ran(trial_provenance([_study_with_workers(
        [{"host": "h", "boot": "b", "pid": 7, "worker": 0, "device": "cpu"}] * 3)]))
    assert one == ("The 3 completed trials ran in 1 worker process (worker id 0) on 1 host (h: 3 trials); "
                   "devices: cpu (3 trials).")
    assert "none of which recorded the worker" in runs.how_trials_ran(trial_provenance([_study_with_workers([None])]))
    assert runs.how_trials_ran(trial_provenance([])) == "No trial has completed yet."


def test_studies_header_says_how_the_trials_ran_not_how_many_workers_drew_the_figures():
    from labkit.run.profiles import lab_settings
    from labkit.search import trial_provenance
    s = lab_settings("lab2_search", "smoke", workers=1)  # the drawing process: one worker
    records = [{"host": "vm", "boot": "b", "pid": 200 + w, "worker": w} for w in range(12)]
    text = narrate2.studies_header("journal:figures/lab2/studies.journal", "abcd1234",
                               trial_provenance([_study_with_workers(records)]), s)
    assert "ran in 12 worker processes (worker ids 0-11)" in text and "process(es)" not in text
    assert text.startswith(f"Studies in `journal:figures/lab2/studies.journal` (tag `abcd1234`); {s['trials']} "
                           f"trials per sampler and seed, seeds {s['seeds']}. Search space narrowed")
    assert "device not recorded (12 trials)" in text

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch

from labkit import search
from labkit.labs import lab2_objectives, lab2_space
from labkit.records import lab2_search as space
from labkit.quant import QuantLinear

optuna.logging.set_verbosity(optuna.logging.WARNING)
HERE = Path(__file__).resolve().parents[1]  # tests/: the helper modules beside conftest.py


def test_every_sampled_config_builds_a_model_with_those_values():
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=3))
    seen = []

    def objective(trial):
        arch = lab2_space.sample_architecture(trial)
        model = lab2_space.build_model(arch)
        cfg = model.config
        for key, value in arch["config"].items():
            assert getattr(cfg, key) == value
        assert len(model.bert.encoder.layer) == arch["config"]["num_hidden_layers"]
        assert model.bert.encoder.layer[0].intermediate.dense.out_features == arch["config"]["intermediate_size"]
        for key, choice in arch["linears"].items():
            layer, name = key.split(".", 1)
            module = model.get_submodule(f"bert.encoder.layer.{int(layer[5:])}.{name}")
            assert isinstance(module, torch.nn.Identity if choice == "identity" else torch.nn.Linear)
        x = torch.randint(1000, 30000, (2, 8))
        assert model(input_ids=x).logits.shape == (2, 2)
        seen.append(arch)
        return 0.0

    study.optimize(objective, n_trials=6)
    assert len(seen) == 6
    assert any(c == "identity" for a in seen for c in a["linears"].values())


def test_invalid_combination_is_pruned_not_built(monkeypatch):
    monkeypatch.setitem(space.SPACE, "hidden_size", [130])
    monkeypatch.setitem(space.SPACE, "num_attention_heads", [4, 8])
    study = optuna.create_study()
    study.optimize(lambda t: lab2_space.sample_architecture(t) and 0.0, n_trials=2)
    assert all(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)


def test_sampler_names_and_grid():
    with pytest.raises(ValueError, match="allowed values are 'random', 'grid', 'tpe'"):
        search.make_sampler("cmaes", 0)
    with pytest.raises(ValueError, match="finite search space"):
        search.make_sampler("grid", 0)
    assert len(search.grid_points(space.grid_space())) == 300
    order = search.grid_order(space.grid_space(), seed=3)
    assert len({tuple(p.values()) for p in order}) == 300 and order != search.grid_points(space.grid_space())


def test_best_so_far_is_monotone_and_matches_values(tmp_path):
    study = search.run_study("s", lambda t: t.suggest_float("x", 0, 1), 12, sampler="tpe",
                             storage=f"sqlite:///{tmp_path / 's.db'}", progress=False)
    curve = search.best_so_far(study)
    values = [t.value for t in study.trials]
    assert curve == [max(values[: i + 1]) for i in range(len(values))]


def test_study_killed_mid_run_resumes(tmp_path):
    url, name, log = f"sqlite:///{tmp_path / 'kill.db'}", "killme", tmp_path / "done.txt"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen([sys.executable, str(HERE / "_study_worker.py"), url, name, "12", str(log)],
                            env=env, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if log.exists() and len(log.read_text().split()) >= 3:
            break
        if proc.poll() is not None:
            pytest.fail(f"worker exited early with {proc.returncode}")
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("worker made no progress")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    storage = search.make_storage(url, heartbeat_interval=1, grace_period=2)
    before = {t.number: t.value for t in optuna.load_study(study_name=name, storage=storage).trials
              if t.state == optuna.trial.TrialState.COMPLETE}
    assert len(before) >= 2 and len(before) < 12
    time.sleep(2.5)  # let the dead trial's heartbeat go stale
    done = subprocess.run([sys.executable, str(HERE / "_study_worker.py"), url, name, "12", str(log)],
                          env=env, timeout=120)
    assert done.returncode == 0
    after = optuna.load_study(study_name=name, storage=storage)
    complete = {t.number: t.value for t in after.trials if t.state == optuna.trial.TrialState.COMPLETE}
    assert len(complete) == 12
    assert all(complete[n] == v for n, v in before.items())  # finished trials kept, unchanged
    assert not [t for t in after.trials if t.state == optuna.trial.TrialState.RUNNING]


@pytest.fixture(scope="module")
def tiny_loaders():
    from labkit.run import profiles
    from labkit import recipes

    s = profiles.lab_settings("lab2_search", "smoke", train_size=32, test_size=32, max_length=16)
    return s, recipes.loaders(s)


def test_compression_aware_objective_records_all_stages(tiny_loaders, tmp_path, monkeypatch):
    s, dl = tiny_loaders
    monkeypatch.setitem(space.SPACE, "num_hidden_layers", [2])
    monkeypatch.setitem(space.SPACE, "hidden_size", [128])
    monkeypatch.setitem(space.SPACE, "intermediate_size", [512])
    from labkit.quant import fixed_point

    prune_cfg = {"weight": {"sparsity": 0.5, "method": "l1-norm"}}
    obj = lab2_objectives.NASObjective(dl, s, mode="compress+train", quant=fixed_point(8), prune=prune_cfg,
                                       best_dir=tmp_path / "best")
    study = search.run_study("cas", obj, 2, sampler="random", storage=f"sqlite:///{tmp_path / 'c.db'}",
                             progress=False)
    t = study.best_trial
    assert {"accuracy_trained", "accuracy_compressed", "accuracy_post_trained", "parameters", "accuracy_control",
            "control_seconds"} <= set(t.user_attrs)
    assert t.value == t.user_attrs["accuracy_post_trained"]  # the control is recorded beside, never returned
    assert 0 <= t.user_attrs["accuracy_control"] <= 1
    saved = json.loads((tmp_path / "best" / "best_config.json").read_text())
    assert saved["architecture"]["config"]["hidden_size"] == 128
    state = torch.load(tmp_path / "best" / "best_model.pt", weights_only=True)
    assert any(k.endswith("parametrizations.weight.original") for k in state)  # pruned, not a pickle
    with pytest.raises(ValueError, match="allowed values"):
        lab2_objectives.NASObjective(dl, s, mode="squeeze")


def test_resume_fails_a_trial_that_died_before_its_first_heartbeat(tmp_path):
    # Optuna's stale check ignores trials with no heartbeat row; a process killed in that window must not
    # leave a trial RUNNING forever.
    storage = search.make_storage(f"sqlite:///{tmp_path / 'z.db'}", heartbeat_interval=1, grace_period=1)
    optuna.create_study(study_name="z", storage=storage, direction="maximize").ask()
    time.sleep(1.5)
    study = search.run_study("z", lambda t: t.suggest_float("x", 0, 1), 3, sampler="random", storage=storage,
                             progress=False)
    states = [t.state for t in study.trials]
    assert states[0] == optuna.trial.TrialState.FAIL
    assert states.count(optuna.trial.TrialState.COMPLETE) == 3
    assert optuna.trial.TrialState.RUNNING not in states


def test_a_stale_trial_is_reaped_after_the_storages_own_grace_period(tmp_path):
    """A Study wraps an RDB storage in optuna's cache: the grace period is read through it (it was read as
    missing, so a trial that died before its first heartbeat waited the 60-second default)."""
    from labkit.search.storage import reap_stale

    storage = search.make_storage(f"sqlite:///{tmp_path / 'g.db'}", heartbeat_interval=1, grace_period=1)
    optuna.create_study(study_name="g", storage=storage, direction="maximize").ask()
    time.sleep(1.5)
    study = optuna.load_study(study_name="g", storage=storage)
    assert reap_stale(study) == [0]
    assert study.trials[0].state == optuna.trial.TrialState.FAIL


def test_lab_plans_resume_whatever_the_worker_count(tmp_path):
    from labkit.run import profiles
    from labkit.labs import lab2, lab3

    s = profiles.lab_settings("lab2_search", "smoke", workers=0)
    other = profiles.lab_settings("lab2_search", "smoke", workers=4, mps="on", storage="journal:/elsewhere")
    assert [p.to_json() for p in lab2.task1_plans(s)] == [p.to_json() for p in lab2.task1_plans(other)]
    assert lab2.study_tag(s) != lab2.study_tag(profiles.lab_settings("lab2_search", "smoke", lr=1e-3))
    s3 = profiles.lab_settings("lab3_search", "smoke")
    plans = lab3.phase1_plans(s3, ["a", "b"])
    assert len({p.name for p in plans.values()}) == len(plans) and "workers" not in plans["pareto"].settings
    assert plans["pareto"].directions == ["maximize", "minimize"] and plans["uniform"].queue_only


def test_lab2_task2_starts_its_longest_trials_first():
    from labkit.run import profiles
    from labkit.labs import lab2

    s = profiles.lab_settings("lab2_search", "smoke")
    plans = {p.name.split("-cas-")[1].rsplit("-", 1)[0]: p for p in lab2.task2_plans(s, {"num_hidden_layers": 2})}
    assert plans["compress+train"].priority > plans["compress"].priority > plans["none"].priority
    assert all(p.priority == 0 for p in lab2.task1_plans(s))  # the samplers' studies share workers evenly



def test_the_committed_journals_plans_and_module_paths_resolve():
    """A stored study keeps the plan it was created with: its objective ("lab2", "lab3" or "module:function")
    and any dotted labkit path in it must still import after modules move (``plan.MOVED``)."""
    import importlib
    import lzma
    import re

    from labkit import records
    from labkit.search import plan

    figures = HERE.parent / "figures"
    stored, dotted = [], set()
    for path in (figures / "lab2" / "studies.journal.xz", figures / "lab3" / "studies.journal.xz"):
        raw = path.read_bytes()
        text = (lzma.decompress(raw) if path.suffix == ".xz" else raw).decode()
        dotted |= set(re.findall(r"labkit(?:\.\w+)+(?::\w+)?", text))
        ops = [json.loads(line) for line in text.splitlines()]
        found = [op["user_attr"]["plan"] for op in ops if "plan" in op.get("user_attr", {})]
        assert found, path
        stored += found
    assert {p["objective"] for p in stored} == {"lab2", "lab3"}
    for p in stored:  # as a worker that joins the study rebuilds it
        assert plan.StudyPlan(**p).name == p["name"]
        assert plan.resolve_objective(p["objective"]).__module__.startswith("labkit.labs.")
    for path in dotted:  # none in today's journals: their plans name objectives by registry name
        if ":" in path:
            assert callable(plan.resolve_objective(path))
        else:
            importlib.import_module(plan.MOVED.get(path, path))
    # what the registries named before the lab modules moved out of labkit.search resolves to the same functions
    before = {"lab2": "labkit.search.objectives:lab2_objective", "lab3": "labkit.search.precision:lab3_objective"}
    for name, target in before.items():
        assert plan.resolve_objective(target) is plan.resolve_objective(name)
    before = {"lab2": "labkit.search.lab2:run_all", "lab3": "labkit.search.lab3:run_all"}
    for name, target in before.items():
        assert plan.resolve_objective(target) is plan.resolve_objective(records.searches()[name].run)
    for old, new in plan.MOVED.items():
        assert importlib.import_module(new).__name__ == new and old.startswith("labkit.search.")


def _config_key(s, mode):
    """The cache key a trial of ``mode`` records (training replaced by a stub)."""
    seen = {}

    class Trial:
        def suggest_categorical(self, name, choices):
            return choices[0]

        def set_user_attr(self, name, value):
            seen[name] = value

    obj = lab2_objectives.NASObjective(None, s, mode=mode, quant={"w": 8})
    obj._run = lambda trial, arch: 0.0
    obj(Trial())
    return seen["config_key"]


def test_the_trial_cache_key_holds_warmup(monkeypatch):
    from labkit.run import profiles

    monkeypatch.setitem(space.SPACE, "hidden_size", [128])  # valid with any first head count
    s = profiles.lab_settings("lab2_search", "smoke", device="cpu")
    assert lab2_objectives.trial_settings(s)["warmup"] == s["warmup"] > 0
    # warm-up changes what a trial computes: a trial without it is not reused for one with it
    assert _config_key(s, "compress") != _config_key({**s, "warmup": 0.0}, "compress")


def test_only_compressed_cuda_trials_key_the_compressed_path(monkeypatch, fake_cuda):
    """The compressed model's matmul path and activation-mask path change a compressed trial's bits, so they key
    it (a CPU autocasts nothing: the matmul path only on CUDA); an uncompressed trial keeps its key."""
    from labkit.prune import mask_kernel
    from labkit.run import profiles

    monkeypatch.setitem(space.SPACE, "hidden_size", [128])
    s = profiles.lab_settings("lab2_search", "smoke", device="cpu")
    assert s["qat_matmul"] == "bf16" and "qat_matmul" not in lab2_objectives.trial_settings(s)
    for mode in ("none", "compress"):  # on a CPU nothing autocasts: the same key either way
        assert _config_key(s, mode) == _config_key({**s, "qat_matmul": "fp32"}, mode)
    assert lab2_objectives.compressed_path(s) == {"activation_mask": mask_kernel.CPU_VERSION}
    cuda = {**s, "device": "cuda"}
    assert _config_key(cuda, "none") == _config_key({**cuda, "qat_matmul": "fp32"}, "none")
    assert _config_key(cuda, "compress") != _config_key({**cuda, "qat_matmul": "fp32"}, "compress")
    path = lab2_objectives.compressed_path(cuda)
    assert path == {"qat_matmul": "bf16", "qat_compile": False, "activation_mask": mask_kernel.VERSION}
    monkeypatch.setenv(mask_kernel.ENV, "0")
    assert lab2_objectives.compressed_path(cuda)["activation_mask"] == "topk"
    assert lab2_objectives.qat_matmul({"device": "cuda"}) == "fp32"  # settings stored before the key existed


def _search_benchmark(name: str):
    """A script of benchmarks/search/ as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, HERE.parent / "benchmarks" / "search" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_steady_rate_counts_only_the_window_where_every_worker_is_busy():
    """Worked by hand: worker a starts at 0 and ends trials at 10, 20, 30, 40; worker b starts late, at 12 (its
    start-up), and ends at 22, 32 and 42. The window runs from 12 (b's first start) to 40 (a's last end): the
    trials ending at 20, 22, 30, 32 and 40 are inside, 5 in 28 s. Over the whole run (first start 0, last end 42)
    7 trials read 10 a minute."""
    rate = _search_benchmark("search_throughput").steady_rate
    runs = [("a", s, s + 10) for s in (0, 10, 20, 30)] + [("b", s, s + 10) for s in (12, 22, 32)]
    got = rate(runs)
    assert got["steady_trials"] == 5 and got["steady_seconds"] == 28
    assert got["trials_per_min_steady"] == pytest.approx(60 * 5 / 28)
    assert rate([("a", 0, 10), ("b", 9, 19)])["trials_per_min_steady"] is None  # one trial inside: too short
    assert rate([])["trials_per_min_steady"] is None


def test_task2_schedule_simulation_gives_the_known_makespans():
    """benchmarks/search/task2_schedule.py's simulation on a case worked by hand: 3 workers, four 1 s trials
    without compression and two 4 s post-training trials. Even shares start the second long trial at 2 s
    (ends at 6 s); longest first starts both at once (ends at 4 s)."""
    import dataclasses

    from labkit.run import profiles
    from labkit.labs import lab2

    bench = _search_benchmark("task2_schedule")
    plans = lab2.task2_plans(profiles.lab_settings("lab2_search", "smoke"), {"num_hidden_layers": 2})
    durations = {"none": [1.0] * 4, "compress": [], "compress+train": [4.0, 4.0]}
    assert bench.makespan(plans, durations, workers=3) == 4.0
    assert bench.makespan([dataclasses.replace(p, priority=0) for p in plans], durations, workers=3) == 6.0


def _trial_memory(tmp_path, variants: str) -> dict:
    out = tmp_path / "mem.json"
    bench = _search_benchmark("trial_memory")
    assert bench.main(["--profile", "smoke", "--variants", variants, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_trial_memory_benchmark_names_each_phase_of_a_trial(tmp_path):
    """benchmarks/search/trial_memory.py, smoke profile: each variant runs in its own process and records the
    compress+train trial's phases in order; an unknown variant is refused by name."""
    result = _trial_memory(tmp_path, "eager")
    (row,) = result["rows"]
    assert row["variant"] == "eager" and row["env"] == {"LABKIT_CUDA_GRAPHS": "0"}
    assert [p["phase"] for p in row["phases"]] == ["train", "eval trained", "eval compressed", "post-train",
                                                   "eval post-trained", "control train", "eval control"]
    assert all(p["seconds"] > 0 for p in row["phases"]) and 0 <= row["value"] <= 1
    if not torch.cuda.is_available():
        assert "peak_reserved_gib" not in row  # no memory numbers without a GPU
    with pytest.raises(SystemExit, match="unknown.*allowed: graphs, eager, graphs[+]expandable"):
        _search_benchmark("trial_memory").main(["--profile", "smoke", "--variants", "graphs,cudnn"])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_trial_memory_benchmark_on_gpu_separates_allocated_from_reserved(tmp_path):
    """On a GPU every phase records its peaks, allocated within reserved; the trial's peak is the phases' max."""
    (row,) = _trial_memory(tmp_path, "graphs")["rows"]
    for p in row["phases"]:
        assert 0 < p["peak_allocated_gib"] <= p["peak_reserved_gib"], p
    assert row["peak_reserved_gib"] == max(p["peak_reserved_gib"] for p in row["phases"])


def test_task2_wall_benchmark_runs_both_schedules_and_appends_rows(tmp_path, monkeypatch):
    """benchmarks/search/task2_wall.py on the smoke profile, one worker: each schedule adds a row naming its
    priorities, and every study finished its trials."""
    from labkit.run import profiles

    bench = _search_benchmark("task2_wall")
    out = tmp_path / "wall.json"
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "runs"))
    for schedule in ("longest", "even"):
        assert bench.main(["--schedule", schedule, "--profile", "smoke", "--workers", "1", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    n = profiles.lab_settings("lab2_search", "smoke")["compression_trials"]
    assert [r["schedule"] for r in rows] == ["longest", "even"]
    assert rows[0]["priorities"] == {"none": 0, "compress": 1, "compress+train": 2}
    assert rows[1]["priorities"] == {"none": 0, "compress": 0, "compress+train": 0}
    assert all(r["completed"] == {"none": n, "compress": n, "compress+train": n} for r in rows)
    assert all(r["wall_seconds"] > 0 and r["max_gpu_peak_gib"] is None for r in rows)  # no GPU here

"""labkit.maintain.regenerate: a regeneration split over calls with a time budget, resumed from its state file."""
import json
import lzma
import time
import pytest
import torch

from labkit import recipes
from labkit.maintain import regenerate


@pytest.fixture()
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABKIT_COMMIT", "a" * 40)
    monkeypatch.setattr(regenerate, "COMMITTED_STATE", tmp_path / "committed" / "regen_state.json")
    return tmp_path


class FakeClock:
    """time.monotonic for regenerate: each fake notebook advances it by its own duration."""

    def __init__(self, monkeypatch):
        self.now = 1000.0
        monkeypatch.setattr(regenerate.time, "monotonic", lambda: self.now)


def fake_runner(clock, durations, outcome=None):
    ran = []

    def run(step, timeout, log):
        ran.append((step.notebook, round(timeout)))
        took = durations.get(step.notebook, 10)
        if took > timeout:  # the real runner kills it at its timeout
            clock.now += timeout
            return "timeout", timeout
        clock.now += took
        return (outcome or {}).get(step.notebook, "done"), took
    return run, ran


def test_budget_splits_the_plan_and_the_next_call_resumes(runs, monkeypatch):
    clock = FakeClock(monkeypatch)
    durations = {"lab0_graphs_lora": 100, "lab1_quantize": 100, "lab1_prune": 250, "lab4_mxint8": 100}
    run, ran = fake_runner(clock, durations)
    state = regenerate.regenerate(330, runner=run)
    # 310 s usable: lab0 and lab1_quantize take 200; lab1_prune's slot (120) does not fit in the 110 s left,
    # lab4_mxint8's (100) does; nothing else fits the 10 s after it
    assert [r[0] for r in ran][:2] == ["lab0_graphs_lora", "lab1_quantize"]
    assert "lab1_prune" not in [r[0] for r in ran]
    assert state["steps"]["lab0_graphs_lora"]["status"] == "done"
    assert state["steps"]["lab0_graphs_lora"]["runs"][0]["commit"] == "a" * 40
    # a second call skips what is done, and the state file carries over
    run2, ran2 = fake_runner(clock, durations)
    state2 = regenerate.regenerate(2000, runner=run2)
    assert "lab0_graphs_lora" not in [r[0] for r in ran2] and "lab1_quantize" not in [r[0] for r in ran2]
    assert [c["call"] for c in state2["calls"]] == ["call1", "call2"]
    assert not regenerate.pending(state2)


def test_a_measured_time_replaces_the_estimate(runs, monkeypatch):
    state = {"steps": {"lab4_perf": {"runs": [{"status": "done", "seconds": 420.0}]}}, "calls": [], "sft": {}}
    step = next(s for s in regenerate.PLAN if s.notebook == "lab4_perf")
    assert regenerate.expected_seconds(step, state) == 420.0
    assert regenerate.should_start(step, state, 400)[0] is False
    assert "400 s left < 420 s" in regenerate.should_start(step, state, 400)[1]
    # a notebook that keeps its finished seeds starts whenever its slot fits, like a search
    prune = next(s for s in regenerate.PLAN if s.notebook == "lab1_prune")
    assert prune.resumable and regenerate.should_start(prune, state, prune.min_slot)[0]
    assert not regenerate.should_start(prune, state, prune.min_slot - 1)[0]


def test_search_interrupted_is_partial_and_resumes(runs, monkeypatch):
    clock = FakeClock(monkeypatch)
    run, ran = fake_runner(clock, {"lab3_search": 10_000})
    state = regenerate.regenerate(300, only=["lab3_search"], runner=run)
    assert state["steps"]["lab3_search"]["status"] == "partial"
    assert ran == [("lab3_search", 280)]  # the whole budget less the packing margin
    run2, ran2 = fake_runner(clock, {"lab3_search": 50})
    state = regenerate.regenerate(300, only=["lab3_search"], runner=run2)
    assert state["steps"]["lab3_search"]["status"] == "done"
    assert [r["status"] for r in state["steps"]["lab3_search"]["runs"]] == ["timeout", "done"]


def test_a_failed_notebook_is_recorded_and_the_plan_goes_on(runs, monkeypatch):
    clock = FakeClock(monkeypatch)
    run, ran = fake_runner(clock, {}, outcome={"lab1_quantize": "failed"})
    state = regenerate.regenerate(3000, runner=run)
    assert state["steps"]["lab1_quantize"]["status"] == "failed"
    assert state["steps"]["lab1_prune"]["status"] == "done"
    assert regenerate.pending(state)[0].notebook == "lab1_quantize"  # tried again next call


def test_committed_studies_seed_the_search_and_finished_ones_are_published(runs, monkeypatch):
    clock = FakeClock(monkeypatch)
    seed = regenerate._settings.REPO_ROOT / "figures" / "lab2" / "studies.journal.xz"
    run, ran = fake_runner(clock, {})
    regenerate.regenerate(1000, only=["lab2_search"], runner=run)
    copied = runs / "runs" / "optuna" / "lab2.journal"
    assert copied.read_bytes() == lzma.decompress(seed.read_bytes())  # unpacked to resume from
    published = runs / "figures" / "lab2" / "studies.journal.xz"  # compressed beside the figures
    assert lzma.decompress(published.read_bytes()) == copied.read_bytes()


def test_a_compressed_journal_seeds_and_opens_as_storage(runs, tmp_path):
    from labkit.search.storage import make_storage, unpacked_journal

    committed = regenerate._settings.REPO_ROOT / "figures" / "lab3" / "studies.journal.xz"
    text = unpacked_journal(committed)
    assert text != committed and text.read_bytes() == lzma.decompress(committed.read_bytes())
    assert committed.read_bytes()[:6] == b"\xfd7zXZ\x00"  # the committed file stays compressed
    storage = make_storage(f"journal:{committed}")
    studies = storage.get_all_studies()
    assert any(st.study_name.startswith("lab3") for st in studies)
    # every trial the committed full-profile results drew from is in it
    drawn = json.loads((committed.parent / "search_integer.json").read_text())["numbers"]["trials"]
    assert sum(len(storage.get_all_trials(st._study_id)) for st in studies) > len(drawn) > 0


def test_only_names_real_notebooks(runs):
    with pytest.raises(ValueError, match=r"--only \['lab9'\]: allowed notebooks are lab0_graphs_lora"):
        regenerate.regenerate(100, only=["lab9"])


def test_sft_digests_are_compared_across_calls(runs):
    folder = runs / "cache" / "checkpoints"
    folder.mkdir(parents=True)
    sd = {"w": torch.arange(6.0).reshape(2, 3)}
    torch.save({"state_dict": sd}, folder / "sft-x.pt")
    state = {"steps": {}, "calls": [], "sft": {}}
    assert regenerate.record_sft(state, "call1") == []
    assert state["sft"]["sft-x.pt"]["call1"] == recipes.state_digest(sd)
    assert regenerate.record_sft(state, "call2") == []  # the same weights again: no warning
    torch.save({"state_dict": {"w": sd["w"] + 1e-6}}, folder / "sft-x.pt")
    warnings = regenerate.record_sft(state, "call3")
    assert len(warnings) == 1 and "differ from an earlier call's" in warnings[0]


def test_state_digest_sees_every_bit_and_name():
    a = {"x": torch.tensor([1.0, 2.0]), "y": torch.zeros(2, dtype=torch.int64)}
    same = {"y": torch.zeros(2, dtype=torch.int64), "x": torch.tensor([1.0, 2.0])}
    assert recipes.state_digest(a) == recipes.state_digest(same)
    flipped = {"x": torch.tensor([1.0, 2.0]).view(torch.int32).add(1).view(torch.float32), "y": a["y"]}
    assert recipes.state_digest(flipped) != recipes.state_digest(a)
    assert recipes.state_digest({"z": a["x"], "y": a["y"]}) != recipes.state_digest(a)


def test_status_and_cli(runs, capsys):
    assert regenerate.main(["--status"]) == 0
    out = capsys.readouterr().out
    assert "lab0_graphs_lora" in out and "pending" in out and "left: lab0_graphs_lora" in out
    with pytest.raises(SystemExit):
        regenerate.main(["--budget", "5"])
    assert "--budget 5.0: must be > 20 seconds" in capsys.readouterr().err
    assert not (runs / "runs" / "regen" / "state.json").exists()  # a refused call records nothing


def test_parallel_runs_untimed_steps_together_and_timed_ones_alone(runs, monkeypatch):
    import threading

    active, peak, order = [0], [0], []
    lock = threading.Lock()

    def run(step, timeout, log, env=None):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            order.append((step.notebook, active[0]))
        import time as _t
        _t.sleep(0.2)
        with lock:
            active[0] -= 1
        return "done", 1.0

    state = regenerate.regenerate(3000, only=["lab1_prune", "lab3_formats", "lab4_perf", "lab2_search"],
                                  runner=run, parallel=True)
    assert peak[0] == 2  # lab1_prune and lab3_formats side by side
    assert dict(order)["lab4_perf"] == 1  # the timed one ran alone, afterwards
    assert dict(order)["lab2_search"] == 1  # a search too: its workers have an MPS daemon of their own
    assert state["steps"]["lab1_prune"]["runs"][0]["side_by_side"] is True
    assert "side_by_side" not in state["steps"]["lab4_perf"]["runs"][0]
    assert "side_by_side" not in state["steps"]["lab2_search"]["runs"][0]
    assert not regenerate.pending(state, ["lab1_prune", "lab3_formats", "lab4_perf", "lab2_search"])
    # notebook time: the two runs side by side count once, as the group's wall (about 0.2 s here, not 1 + 1)
    group = state["calls"][-1]["side_by_side_s"]
    assert 0.1 <= group < 1.0 and state["calls"][-1]["side_by_side_mps"] is False  # no GPU here: no daemon
    assert regenerate.notebook_seconds(state) == pytest.approx(2.0 + group)


def test_parallel_notebooks_run_under_the_mps_daemons_environment(runs, monkeypatch):
    import contextlib

    from labkit.search import mps

    seen = {}

    @contextlib.contextmanager
    def daemon(folder, mode, share, clients):
        seen["mode"] = mode
        yield {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(share)}

    def run(step, timeout, log, env=None):
        seen[step.notebook] = env
        return "done", 1.0

    monkeypatch.setattr(mps, "daemon", daemon)
    state = regenerate.regenerate(3000, only=["lab1_prune", "lab3_formats"], runner=run, parallel=True)
    assert seen["mode"] == "auto" and state["calls"][-1]["side_by_side_mps"] is True
    for name, other in (("lab1_prune", "lab3_formats"), ("lab3_formats", "lab1_prune")):
        assert seen[name]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "100"  # LABKIT_MPS_SM_PERCENT may say less
        assert seen[name]["CUDA_MPS_PIPE_DIRECTORY"].endswith("pipe")
        assert seen[name]["LABKIT_GPU_SHARED"] == other  # its results' provenance names the other
    monkeypatch.setenv(regenerate.PARALLEL_MPS_ENV, "sometimes")
    with pytest.raises(ValueError, match="LABKIT_REGEN_MPS='sometimes': allowed values are 'on', 'off', 'auto'"):
        regenerate.regenerate(3000, only=["lab0_graphs_lora", "lab1_quantize"], runner=run, parallel=True)
    assert len(regenerate.load_state()["calls"]) == 1  # the refused call recorded nothing


def test_the_notebook_runner_adds_the_environment_it_is_given(runs, tmp_path):
    step = regenerate.Step("probe", 1, 0, script=("-c", "import os; assert os.environ['LABKIT_PROBE'] == 'yes'"))
    status, _ = regenerate._run_notebook(step, 60, tmp_path / "probe.log", env={"LABKIT_PROBE": "yes"})
    assert status == "done"
    status, _ = regenerate._run_notebook(step, 60, tmp_path / "probe.log")
    assert status == "failed"


def test_a_fresh_machine_resumes_from_the_committed_state(runs, monkeypatch):
    committed = {"steps": {"lab0_graphs_lora": {"status": "done", "runs": [{"call": "call1", "status": "done",
                                                                            "seconds": 70.0}]}},
                 "calls": [{"call": "call1"}], "sft": {}}
    regenerate.COMMITTED_STATE.parent.mkdir(parents=True)
    regenerate.COMMITTED_STATE.write_text(json.dumps(committed))
    clock = FakeClock(monkeypatch)
    run, ran = fake_runner(clock, {})
    state = regenerate.regenerate(400, only=["lab0_graphs_lora", "lab1_quantize"], runner=run)
    assert [r[0] for r in ran] == ["lab1_quantize"]  # lab0 was done in the committed state
    assert [c["call"] for c in state["calls"]] == ["call1", "call2"]
    assert (runs / "runs" / "regen" / "state.json").is_file()  # from now on this machine's own


def test_fresh_status_on_a_clean_clone_shows_every_step_pending(tmp_path, monkeypatch, capsys):
    # a clean clone: no runs/ of its own, the committed record of the last landed call (every step done there)
    from labkit import cli

    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path / "runs"))
    committed = regenerate.COMMITTED_STATE.read_bytes()
    assert cli.main(["regenerate", "--status"]) == 0
    resumed = capsys.readouterr().out
    calls = len(json.loads(committed)["calls"])
    record = "notebooks/executed/full/regen_state.json"
    # without --fresh: the record, saying it is one and how many calls it holds
    assert resumed.strip() == regenerate.status_text(json.loads(committed), record)
    assert resumed.startswith(f"[regen] the regeneration recorded in {record}: {calls} call(s) so far")
    assert cli.main(["regenerate", "--fresh", "--status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"[regen] the plan a fresh regeneration starts with (superseding {record}: "
                          f"{calls} call(s)") and "nothing has run" in out.splitlines()[0]
    for step in regenerate.PLAN:
        line = next(li for li in out.splitlines() if li.split()[:1] == [step.notebook])
        fresh = regenerate.fresh_state(json.loads(committed), regenerate.COMMITTED_STATE)
        expected = regenerate.expected_seconds(step, fresh)  # the superseded record's time, or the plan's estimate
        assert line.split()[1] == "pending" and f"(not started; expected {expected:.0f} s)" in line, line
    total = sum(regenerate.expected_seconds(s, fresh) for s in regenerate.PLAN)
    assert out.rstrip().endswith("left: " + ", ".join(s.notebook for s in regenerate.PLAN) + f" (expected {total:.0f} s)")
    assert regenerate.main(["--fresh", "--status"]) == 0  # python -m labkit.maintain.regenerate too
    assert capsys.readouterr().out == out
    assert not (tmp_path / "runs").exists() and regenerate.COMMITTED_STATE.read_bytes() == committed  # read only


def test_fresh_starts_over_keeps_the_superseded_record_and_the_next_call_resumes_it(runs, monkeypatch):
    older = {"steps": {}, "calls": [{"call": "call1"}], "sft": {}}
    committed = {"steps": {"lab0_graphs_lora": {"status": "done", "runs": [{"call": "call1", "status": "done",
                                                                            "seconds": 70.0}]}},
                 "calls": [{"call": "call1"}, {"call": "call2"}], "sft": {"sft-x.pt": {"call1": "ab"}},
                 "history": [older]}
    regenerate.COMMITTED_STATE.parent.mkdir(parents=True)
    regenerate.COMMITTED_STATE.write_text(json.dumps(committed))
    journal = runs / "runs" / "optuna" / "lab3.journal"
    journal.parent.mkdir(parents=True)
    journal.write_text("old trials\n")
    clock = FakeClock(monkeypatch)
    run, ran = fake_runner(clock, {})
    only = ["lab0_graphs_lora", "lab2_search"]
    state = regenerate.regenerate(400, only=only, runner=run, fresh=True)
    assert [r[0] for r in ran] == only  # lab0 again, though the record had it done
    assert [c["call"] for c in state["calls"]] == ["call1"] and state["sft"] == {}
    earlier = {k: v for k, v in committed.items() if k != "history"}
    assert state["history"] == [older, earlier]  # kept whole, its own history flattened in front
    fresh = state["fresh"]
    assert fresh["supersedes"] == str(regenerate.COMMITTED_STATE)  # outside the repository: as given
    assert fresh["superseded_calls"] == 2 and fresh["superseded_done"] == ["lab0_graphs_lora"]
    assert not journal.exists() and fresh["set_aside"] == ["lab3.journal"]  # renamed, not deleted
    assert [p.read_text() for p in journal.parent.glob("lab3.journal.before-fresh-*")] == ["old trials\n"]
    assert not (runs / "runs" / "optuna" / "lab2.journal").exists()  # no committed studies seeded it
    assert json.loads(regenerate.COMMITTED_STATE.read_text()) == committed  # the committed record untouched
    # the next call (no --fresh) resumes the fresh regeneration, not the committed record
    run2, ran2 = fake_runner(clock, {})
    state2 = regenerate.regenerate(400, only=["lab0_graphs_lora", "lab1_quantize"], runner=run2)
    assert [r[0] for r in ran2] == ["lab1_quantize"]
    assert [c["call"] for c in state2["calls"]] == ["call1", "call2"] and state2["fresh"] == fresh
    assert state2["history"] == [older, earlier]


def test_a_superseded_records_measured_time_still_budgets_a_step():
    step = next(s for s in regenerate.PLAN if s.notebook == "lab4_perf")
    old = {"steps": {"lab4_perf": {"runs": [{"status": "done", "seconds": 436.0}]}}, "calls": [{}], "sft": {}}
    state = regenerate.fresh_state(old, None)
    assert regenerate.pending(state)[0].notebook == "lab0_graphs_lora" and len(regenerate.pending(state)) == len(regenerate.PLAN)
    assert regenerate.expected_seconds(step, state) == 436.0  # not the plan's estimate of 300
    assert regenerate.should_start(step, state, 400)[0] is False
    # a superseded time below the estimate (fewer seeds then) is only a floor: the estimate stands
    old["steps"]["lab4_perf"]["runs"][0]["seconds"] = 100.0
    assert regenerate.expected_seconds(step, regenerate.fresh_state(old, None)) == step.estimate


def test_a_resumable_step_took_every_call_it_ran_in():
    lab2 = next(s for s in regenerate.PLAN if s.notebook == "lab2_search")
    perf = next(s for s in regenerate.PLAN if s.notebook == "lab4_perf")
    assert lab2.resumable and not perf.resumable
    runs = [{"call": "call5", "status": "failed", "seconds": 459.0}, {"call": "call6", "status": "done", "seconds": 313.0}]
    old = {"steps": {"lab2_search": {"status": "done", "runs": runs},
                     "lab4_perf": {"status": "done", "runs": [{**r, "seconds": 400.0 + r["seconds"]} for r in runs]}},
           "calls": [{}], "sft": {}}
    fresh = regenerate.fresh_state(old, None)
    assert regenerate.expected_seconds(lab2, fresh) == 772.0  # Task 1 in one call, Task 2 in the next
    assert regenerate.expected_seconds(perf, fresh) == 713.0  # a failed run of a step that starts over: not its time
    unfinished = {"steps": {"lab2_search": {"status": "partial", "runs": runs[:1]}}, "calls": [{}], "sft": {}}
    assert regenerate.expected_seconds(lab2, regenerate.fresh_state(unfinished, None)) == lab2.estimate


def test_lanes_run_one_step_per_gpu_longest_first(runs, monkeypatch):
    import threading
    import time as _t

    active, gpus_used, lock = {}, [], threading.Lock()

    def run(step, timeout, log, gpu):
        with lock:
            assert gpu not in active.values()  # one notebook per GPU at a time
            active[step.notebook] = gpu
            gpus_used.append((step.notebook, gpu))
        _t.sleep(0.05)
        with lock:
            del active[step.notebook]
        return "done", 1.0

    only = ["lab0_graphs_lora", "lab1_prune", "lab3_formats", "lab4_perf"]
    state = regenerate.regenerate(3000, only=only, runner=run, gpus=2)
    assert {g for _, g in gpus_used} == {0, 1} and not regenerate.pending(state, only)
    # the two longest start first, one on each GPU (which thread records first is a race)
    assert {n for n, _ in gpus_used[:2]} == {"lab1_prune", "lab3_formats"}
    assert state["calls"][-1]["gpus"] == 2 and state["steps"]["lab1_prune"]["runs"][0]["gpu"] in (0, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert regenerate._lane_device(1) == "5"  # a lane counts among the devices this process was given


def test_search_and_per_seed_steps_get_a_deadline_before_their_timeout():
    from labkit.labs import per_seed
    from labkit.search.worker import DEADLINE_ENV

    steps = {s.notebook: s for s in regenerate.PLAN}
    env = regenerate.deadline_env(steps["lab2_search"], 500)
    assert abs(float(env[DEADLINE_ENV]) - (time.time() + 500 - regenerate.SEARCH_DRAW_S)) < 5
    env = regenerate.deadline_env(steps["lab1_prune"], 500)  # between seeds, leaving time for the figures
    assert abs(float(env[per_seed.DEADLINE_ENV]) - (time.time() + 500 - regenerate.SEEDS_FINISH_S)) < 5
    assert regenerate.deadline_env(steps["lab4_perf"], 500) == {}  # neither: runs to its timeout


def test_a_per_seed_step_stopped_between_seeds_is_partial_and_resumes(runs):
    """A notebook that failed with per_seed's stop is resumable work left, like a search stopped between
    trials; one that failed otherwise stays failed."""
    def run(step, timeout, log):
        log.parent.mkdir(parents=True, exist_ok=True)
        if step.notebook == "lab1_prune":
            log.write_text("SeedsStopped: lab1/pruning: stopped before seed 2 at LABKIT_SEEDS_DEADLINE: ...")
        return ("failed" if step.notebook in ("lab1_prune", "lab1_quantize") else "done"), 5.0

    state = regenerate.regenerate(3000, only=["lab1_quantize", "lab1_prune"], runner=run)
    assert state["steps"]["lab1_prune"]["status"] == "partial"
    assert state["steps"]["lab1_quantize"]["status"] == "failed"
    assert {s.notebook for s in regenerate.pending(state)} >= {"lab1_prune", "lab1_quantize"}


def test_a_step_alone_records_the_figures_it_wrote(runs, monkeypatch):
    """Each finished step lists the files under figures/ it wrote (quick/ and smoke/ left out), not files
    another step wrote before it; a step that did not finish, or ran side by side, lists none."""
    import os

    figures = runs / "figures"
    (figures / "lab1").mkdir(parents=True)
    old = figures / "lab1" / "quantization.json"
    old.write_text("from before")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    writes = {"lab1_quantize": ["lab1/ptq.json", "lab1/quick/ptq.json"], "lab1_prune": ["lab1/pruning.json"]}

    def run(step, timeout, log):
        for name in writes.get(step.notebook, []):
            (figures / name).parent.mkdir(parents=True, exist_ok=True)
            (figures / name).write_text(step.notebook)
        return ("timeout" if step.notebook == "lab1_prune" else "done"), 1.0

    state = regenerate.regenerate(3000, only=["lab1_quantize", "lab1_prune"], runner=run)
    assert state["steps"]["lab1_quantize"]["runs"][0]["files"] == ["lab1/ptq.json"]
    assert "files" not in state["steps"]["lab1_prune"]["runs"][0]
    state = regenerate.regenerate(3000, only=["lab1_prune", "lab3_formats"], runner=lambda s, t, log, env=None: run(s, t, log),
                                  parallel=True)
    assert all("files" not in r for r in state["steps"]["lab3_formats"]["runs"])


def test_every_notebook_steps_code_names_what_exists_and_the_notebook_file():
    """The code a notebook step's process runs imports names that exist (a moved module once failed every notebook
    of a GPU call in a second, which the fake runners above cannot see) and runs the step's notebook file."""
    import ast
    import importlib
    from pathlib import Path

    def from_import(module, name):  # what `from module import name` binds: an attribute, else a submodule
        mod = importlib.import_module(module)
        return getattr(mod, name) if hasattr(mod, name) else importlib.import_module(f"{module}.{name}")

    notebooks = [step for step in regenerate.PLAN if not step.script]
    assert notebooks
    for step in notebooks:
        tree = ast.parse(regenerate.notebook_code(step))
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    names[alias.asname or alias.name] = from_import(node.module, alias.name)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        assert [(c.func.value.id, c.func.attr) for c in calls] == [("runner", "run_notebook")]
        assert callable(getattr(names["runner"], "run_notebook"))
        path = next(a for a in ast.walk(calls[0]) if isinstance(a, ast.Constant) and str(a.value).endswith(".ipynb"))
        assert Path(path.value) == regenerate._settings.REPO_ROOT / "notebooks" / f"{step.notebook}.ipynb"
        assert Path(path.value).is_file(), step.notebook

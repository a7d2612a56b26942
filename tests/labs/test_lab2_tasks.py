"""What the lab2_search notebook reads and stores from its studies (labkit.labs.lab2_tasks, readings.tables, narrate.lab2_search,
lab2_replay), on studies of made-up trials in memory: the curves and bests count completed trials only, up to the
budget; Task 2's within-trial changes include the control where trials recorded one; the cost sentence counts the
cached trials; and the replays through labkit's own exercise functions agree, while a wrong one is caught."""
import optuna
import pytest

from labkit.exercises import lab2 as ex
from labkit.exercises import lab2_replay as replay
from labkit.narrate import lab2_search as words
from labkit.labs import lab2, lab2_tasks as tasks
from labkit.readings import tables
from labkit.labs.lab2_space import LINEAR_CHOICES, SQUARE_LINEARS, build_model
from labkit.models import count_parameters

optuna.logging.set_verbosity(optuna.logging.WARNING)

SIZES = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512}


def settings(**kw):
    return {"profile": "smoke", "lab": "lab2", "trials": 2, "seeds": [0, 1], "compression_trials": 2, "mps": "off",
            "report_only": False, "space": None, "quant_width": 8, "prune_sparsity": 0.5, **kw}


def params(hidden, identity=0):
    p = {**SIZES, "hidden_size": hidden}
    for i, name in enumerate(f"layer{j}.{n}" for j in range(2) for n in SQUARE_LINEARS):
        p[name] = "identity" if i < identity else "linear"
    return p


def trial(value, hidden=128, identity=0, state=optuna.trial.TrialState.COMPLETE, **attrs):
    p = params(hidden, identity)
    dist = {k: optuna.distributions.CategoricalDistribution(
        LINEAR_CHOICES if "." in k else [v]) for k, v in p.items()}
    return optuna.trial.create_trial(params=p, distributions=dist, value=value if state.name == "COMPLETE" else None,
                                     state=state, user_attrs={"parameters": PARAMETERS[hidden], "n_test": 64, **attrs})


PARAMETERS = {h: count_parameters(build_model({"config": {**SIZES, "hidden_size": h}, "linears": {}}))
              for h in (128, 192)}


def study(*trials):
    st = optuna.create_study(direction="maximize")
    for t in trials:
        st.add_trial(t)
    return st


def task1_studies(s):
    made = {
        "random-s0": [trial(0.6), trial(0.7, 192, identity=2, cached=True), trial(0.9)],  # the third: past the budget
        "random-s1": [trial(0.55), trial(0.5)],
        "grid-s0": [trial(0.58), trial(0.62, 192)],
        "grid-s1": [trial(0.5), trial(0.0, state=optuna.trial.TrialState.FAIL), trial(0.61)],
        "tpe-s0": [trial(0.65, 192, identity=1), trial(0.6)],
        "tpe-s1": [trial(0.52), trial(0.57)],
    }
    return {p.name: study(*made[p.name.split("-")[2] + "-" + p.name.split("-")[3]]) for p in lab2.task1_plans(s)}


def task2_studies(s):
    none = [trial(0.7, 192, identity=2, accuracy_trained=0.7), trial(0.6, accuracy_trained=0.6)]
    comp = [trial(0.66, 192, identity=2, accuracy_trained=0.7, accuracy_compressed=0.66),
            trial(0.61, accuracy_trained=0.63, accuracy_compressed=0.61)]
    post = [trial(0.69, 192, identity=2, accuracy_trained=0.7, accuracy_compressed=0.66, accuracy_post_trained=0.69,
                  accuracy_control=0.72),
            trial(0.64, accuracy_trained=0.6, accuracy_compressed=0.55, accuracy_post_trained=0.64,
                  accuracy_control=0.6, cached=True)]
    made = {"none": none, "compress": comp, "compress+train": post}
    return {p.name: study(*made[p.options["mode"]]) for p in lab2.task2_plans(s, params(192, 2))}


@pytest.fixture
def ran(monkeypatch):
    s = settings()
    t1, t2 = task1_studies(s), task2_studies(s)
    monkeypatch.setattr(tasks.search, "run_studies", lambda plans, **kw: t2 if "cas" in plans[0].name else t1)
    task1 = tasks.run_task1(s, "journal:nowhere", 1)
    return s, task1, tasks.run_task2(s, "journal:nowhere", 1, task1.best.params)


def test_samplers_numbers_cut_every_curve_to_the_budget_and_name_the_best_completed_trial(ran):
    s, task1, _ = ran
    num = tasks.samplers_numbers(task1, s)
    assert list(num) == ["bands", "curves", "rows", "search_seconds", "completed", "trials_from", "report_only",
                         "best", "trials"]
    assert num["curves"]["random"] == [[0.6, 0.7], [0.55, 0.55]]
    assert num["curves"]["grid"][1] == [0.5, 0.61]  # the failed trial is no point of the curve
    assert num["bands"]["random"]["final"] == [0.7, 0.55]
    assert num["rows"][0]["sampler"] == "random"
    assert num["best"]["value"] == 0.9 and num["best"]["trial"] == 2  # the best trial of any study, past the budget too
    assert num["completed"]["lab2-smoke-grid-s1-" + num["best"]["study"].rsplit("-", 1)[1]] == 2
    assert len(num["trials"][num["best"]["study"]]) == 3 and num["trials_from"]["trials"] == 13
    assert words.shortfall(num["completed"], s["trials"]) == ""


def test_compression_numbers_read_each_search_at_its_budget_with_the_control_where_recorded(ran):
    s, task1, task2 = ran
    num = tasks.compression_numbers(task1, task2, s)
    assert list(num) == ["best_so_far", "best", "within_trial", "trials", "start", "search_seconds", "quant", "prune",
                         "completed", "trials_from", "post_vs_control", "report_only"]
    assert num["best_so_far"]["compressed + post-training"] == [0.69, 0.69]
    assert num["best"] == {"no compression": 0.7, "compressed": 0.66, "compressed + post-training": 0.69}
    assert num["within_trial"]["compression, no post-training"]["min"] == pytest.approx(-0.04)
    assert num["within_trial"]["post-training against its control"]["max"] == pytest.approx(0.04)
    assert num["post_vs_control"]["trials"] == 2
    assert num["start"]["value"] == 0.9 and num["prune"]["weight"]["sparsity"] == 0.5
    rows = tables.start_rows(task2.best, task2.starts)
    assert rows[0] == {"objective": "no compression", "best": 0.7, "start (Task 1's best)": 0.7, "start's trial": 0}
    assert [r["within-trial change"] for r in tables.effect_rows(task2.effects)] == list(num["within_trial"])


def test_the_sentences_name_the_best_architecture_and_count_the_cached_trials(ran):
    s, task1, task2 = ran
    assert words.best_architecture(task1.best_study, task1.best).startswith(
        f"Best architecture overall: {task1.best_study} trial 2, accuracy 0.9000, {PARAMETERS[128]:,} parameters: "
        "`{'num_hidden_layers': 2, 'num_attention_heads': 2, 'intermediate_size': 512, 'hidden_size': 128}`, 0 Linear")
    facts = tasks.run_facts("journal:nowhere", s, task1, task2)
    assert "; 2 of 20 trials reused a cached result." in words.run_cost(facts, s)
    header = words.run_header(facts, {**s, "mps": "on"})
    assert header.endswith("Workers ran under CUDA MPS in this run.") and "19 completed trials" in header


def test_the_replays_through_labkits_own_functions_agree_and_a_wrong_curve_is_caught(ran):
    s, task1, task2 = ran
    sample, curve = ex.sample_architecture.reference, ex.best_so_far.reference
    rows = replay.drawn(task1, sample)
    assert rows[0]["trial"] == 0 and rows[0]["hidden_size"] == 128 and rows[0]["identity"] == 0
    replay.rebuilt_best(task1, sample)
    assert replay.sampler_curves(task1, curve, s)[0]["best so far"] == "0.6000, 0.7000"
    replays = replay.objectives(task2, sample, ex.compression_objective.reference, curve, s)
    assert [r["trial"] for r in replays] == [0, 0, 0] and replays[2]["value"] == 0.69
    with pytest.raises(AssertionError, match="other curves"):
        replay.sampler_curves(task1, lambda values, limit=None: [max(v for v in values if v is not None)], s)


def test_the_remeasure_cell_returns_numbers_and_narrate_draws_each_side_per_seed(monkeypatch):
    from labkit.labs import lab2_remeasure

    entry = {"mode": "none", "best": {"trial": 3, "value": 0.8, "accuracy": [0.79, 0.81]},
             "runner_up": {"trial": 1, "value": 0.78, "accuracy": [0.77, 0.76]}}
    numbers = {"seeds": [1, 2], "task1": entry, "task2": {}}
    monkeypatch.setattr(lab2_remeasure, "run", lambda *a, **k: (None, numbers))
    assert lab2_remeasure.in_notebook({"report_only": True, "profile": "quick"}) is None
    assert words.remeasured_table(None).startswith("Report only: nothing is retrained here")
    got = lab2_remeasure.in_notebook({"report_only": False, "profile": "quick"}, k=2)
    assert got is numbers
    lines = words.remeasured_table(got).splitlines()
    assert lines[0] == "| comparison | side | trial | in the search | seed 1 | seed 2 |"
    assert lines[2].startswith("| Task 1 | best | 3 | 0.8")

"""Lab 2's readings: the committed answers state every one; numbers changed so that a verdict flips flip the
rendered sentence; the readings' own arithmetic against hand-computed values; and the remeasure retrains both
sides of each comparison with fresh seeds, paired (on CPU, smoke settings)."""
import copy
import json
import math
from pathlib import Path

import pytest

from _lab2_remeasure import SMALL, WIDE, task1_samplers
from labkit import readings, redraw
from labkit.answers import lab2_search as answers
from labkit.labs.lab2 import MODES
from labkit.readings import lab2_search as r2
from labkit.readings import stats

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "figures"


@pytest.fixture(autouse=True)
def committed_figures(monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(FIGURES))


def _payloads(profile="full"):
    return copy.deepcopy(redraw.payloads_of("lab2_search", profile))


def _by(payloads):
    return {r.key: r for r in readings.compute("lab2_search", payloads)}


@pytest.mark.parametrize("profile", ["full", "quick"])
def test_the_committed_answers_state_every_reading(profile):
    payloads = _payloads(profile)
    text = (FIGURES / "lab2" / ("" if profile == "full" else profile) / "answers.md").read_text()
    found = readings.compute("lab2_search", payloads)
    assert {"samplers.verdict", "best.is_best_trial", "best.winner", "collapse.by_depth", "compression.effect",
            "start.any", "post.vs_compressed", "post.vs_control"} <= {r.key for r in found}
    assert [r.key for r in found if r.says not in text] == []
    assert all(r.holds for r in found), [(r.key, r.verdict, r.expect) for r in found if not r.holds]
    assert readings.mismatches(found, payloads) == []


def test_the_committed_verdicts():
    """What the committed results' readings must say whatever their numbers: the retrained verdicts cite the
    fresh seeds; before the retraining a best of N on one seed is never established, and its sentences carry
    the numbers they were computed from."""
    payloads = _payloads()
    fresh = payloads["remeasured"]["numbers"]["seeds"]
    committed = _by(payloads)
    assert committed["best.winner"].says.startswith(f"**Retrained with {len(fresh)} fresh seeds, the best architecture")
    by = _by({**payloads, "remeasured": None})
    assert by["samplers.verdict"].expect == ("level",)  # the committed finding, a claim of its verdict
    w, q = by["best.winner"], by["best.winner"].quantities
    assert w.verdict == "not established" and q["trials"] == task1_trials(payloads)
    assert f"{q['runner_up_study']} trial {q['runner_up_trial']}, {q['runner_up']:.4f}" in w.says
    assert f"{q['runner_up_se']:.2f} SE below it" in w.says
    c, q = by[f"start.{_beaten(payloads)}"], by[f"start.{_beaten(payloads)}"].quantities
    # the SE of the difference of two accuracies, not one accuracy's SE
    ca = payloads["compression_aware"]
    n = r2.n_test(ca["numbers"]["trials"], ca["settings"])
    se = math.sqrt(q["start"] * (1 - q["start"]) / n + q["best"] * (1 - q["best"]) / n)
    assert c.verdict == "not established" and q["se"] == pytest.approx(se, rel=1e-9)
    assert f"{q['difference']:+.4f} ± {se:.4f} (SE of the difference, {q['difference'] / se:+.1f} SE)" in c.says
    assert by["start.any"].says.startswith("**No search's best is established above its start**")
    pc = by["post.vs_control"]  # "about as far as the control" is what level says, and only level
    assert ("not told apart" in pc.says) == (pc.verdict == "level"), (pc.verdict, pc.says)
    at_chance = by["collapse.by_depth"].quantities
    assert at_chance["trials"] == task1_trials(payloads) and 0 <= at_chance["at_chance"] <= at_chance["trials"]


def task1_trials(payloads) -> int:
    """Task 1's trials by its settings: trials per study x seeds x three samplers."""
    s = payloads["samplers"]["settings"]
    return s["trials"] * len(s["seeds"]) * 3


def _flip(payloads, by_key, key):
    """The reading ``key`` and the answers rendered from ``payloads``."""
    text = answers.render(payloads)
    r = by_key(payloads)[key]
    assert r.says in text
    return r, text


def test_a_sampler_far_ahead_on_every_seed_flips_the_verdict_and_its_sentence():
    p = _payloads()
    level, text = _flip(p, _by, "samplers.verdict")
    assert "**No sampler can be called better at this budget**" in text and "wins**" not in text
    band = p["samplers"]["numbers"]["bands"]["tpe"]
    band["final"] = [v + 0.02 for v in band["final"]]
    band["final_mean"] += 0.02
    won, text = _flip(p, _by, "samplers.verdict")
    assert won.verdict == "higher" and not won.holds  # the committed finding, no winner, is a claim: it fails
    assert "**TPE wins**" in text and "No sampler can be called better" not in text


def test_controls_below_the_post_trained_models_flip_the_control_reading():
    p = _payloads()
    for t in p["compression_aware"]["numbers"]["trials"]["compressed + post-training"]:
        t["accuracy_control"] = t["accuracy_post_trained"] - 0.01 - 0.001 * (t["number"] % 3)
    r, text = _flip(p, _by, "post.vs_control_trained")
    assert r.verdict == "higher" and "**ends above the control**" in text and "about as far as" not in text
    for t in p["compression_aware"]["numbers"]["trials"]["compressed + post-training"]:
        t["accuracy_control"] = t["accuracy_post_trained"] + 0.01 + 0.001 * (t["number"] % 3)
    r, text = _flip(p, _by, "post.vs_control_trained")
    assert r.verdict == "lower" and "**the uncompressed model given the same training stays ahead**" in text


def _beaten(payloads) -> str:
    """A Task 2 search whose best (in the search) is above its start: the one the remeasure retrains."""
    trials = payloads["compression_aware"]["numbers"]["trials"]
    return next(label for label, ts in trials.items() if max(t["value"] for t in ts) > r2.start_of(ts)["value"])


def _remeasured(best, runner, fresh_start, fresh_best, payloads):
    """A remeasured payload: Task 1's best/runner-up and a beaten search's (``_beaten``) best/start per fresh
    seed."""
    s, c = payloads["samplers"]["numbers"], payloads["compression_aware"]["numbers"]
    label = _beaten(payloads)
    ts = c["trials"][label]
    start, top = r2.start_of(ts), max(ts, key=lambda t: t["value"])
    ru = r2.runner_up(s["best"], s["trials"])
    return {"numbers": {"seeds": [1, 2, 3], "search_seed": 0, "n_test": 25_000, "seconds": 1.0,
                        "task1": {"mode": "none",
                                  "best": {"study": s["best"]["study"], "trial": s["best"]["trial"], "accuracy": best},
                                  "runner_up": {"study": ru[0], "trial": ru[1]["number"], "accuracy": runner}},
                        "task2": {label: {"mode": MODES[label],
                                                 "best": {"trial": top["number"], "value": top["value"], "accuracy": fresh_best},
                                                 "start": {"trial": start["number"], "value": start["value"],
                                                           "accuracy": fresh_start}}}},
            "settings": payloads["samplers"]["settings"], "provenance": payloads["samplers"]["provenance"]}


def test_remeasured_seeds_decide_best_vs_start_and_best_vs_runner_up():
    p = _payloads()
    # the retrained best clearly ahead on every seed: established; level seeds: level
    p["remeasured"] = _remeasured([0.86, 0.861, 0.862], [0.84, 0.841, 0.842], [0.84, 0.842, 0.841],
                                  [0.86, 0.862, 0.861], p)
    label = _beaten(p)
    by = _by(p)
    text = answers.render(p)
    assert by["best.winner"].verdict == "higher" and "stays ahead of the runner-up**" in text
    assert by[f"start.{label}.remeasured"].verdict == "higher" and "is above its start**" in text
    assert by[f"start.{label}"].remeasured_by == f"start.{label}.remeasured" and not by[f"start.{label}"].expect
    assert f"**{label} beat its start**, retrained with fresh seeds" in text
    assert all(x.says in text for x in by.values())
    p["remeasured"] = _remeasured([0.86, 0.85, 0.862], [0.855, 0.86, 0.856], [0.85, 0.852, 0.851],
                                  [0.852, 0.850, 0.852], p)
    by = _by(p)
    text = answers.render(p)
    assert by["best.winner"].verdict == "level" and "the runner-up are level**" in text
    assert by[f"start.{label}.remeasured"].verdict == "level" and "**No search's best is established above its start**" in text
    # retrains of other trials than this search's (a stale file) are not read
    p["remeasured"]["numbers"]["task2"][label]["best"]["trial"] = -1
    assert _by(p)[f"start.{label}"].verdict == "not established"


def test_unpaired_difference_by_hand():
    a, b = [0.80, 0.82, 0.81], [0.70, 0.71, 0.72]
    q = stats.unpaired(a, b, 1000)
    sem = 0.01 / math.sqrt(3)  # both: sd 0.01 over 3 seeds
    se_test = math.hypot(math.sqrt(0.81 * 0.19 / 1000), math.sqrt(0.71 * 0.29 / 1000))
    assert q["difference"] == pytest.approx(0.10) and q["se_seed"] == pytest.approx(math.hypot(sem, sem))
    assert q["se"] == pytest.approx(math.hypot(q["se_seed"], se_test)) and q["verdict"] == "higher"
    assert stats.unpaired([0.80, 0.70, 0.81], b, 1000)["verdict"] == "level"  # a seed of a below one of b
    assert stats.unpaired([0.8], [0.7], 1000)["verdict"] == "not established"


def test_collapse_runner_up_and_start_by_hand():
    trials = {"s": [{"number": 0, "params": {"num_hidden_layers": 2}, "value": 0.86},
                    {"number": 1, "params": {"num_hidden_layers": 8}, "value": 0.5},
                    {"number": 2, "params": {"num_hidden_layers": 8}, "value": 0.84},
                    {"number": 3, "params": {"num_hidden_layers": 2}, "value": 0.85}]}
    assert r2.collapse_by_depth(trials, 25_000) == {2: {"trials": 2, "at_chance": 0}, 8: {"trials": 2, "at_chance": 1}}
    c = r2.collapse_reading(trials, 25_000)
    assert c.verdict == "holds" and c.quantities["lost"] == [8] and "**1 of 4 trials ended at chance**" in c.says
    trials["s"][1]["value"] = 0.83
    assert r2.collapse_reading(trials, 25_000).says.startswith("No depth lost a tenth")
    best = {"params": {"num_hidden_layers": 2}, "value": 0.86}
    assert r2.runner_up(best, trials)[1]["number"] == 2  # trial 3 is the same architecture as the best
    assert r2.start_of([{"number": 1}, {"number": 6, "retry_of": 0}])["number"] == 6
    post = [{"accuracy_trained": 0.86, "accuracy_compressed": 0.85, "accuracy_post_trained": 0.85 + d,
             "accuracy_control": 0.86 + e} for d, e in ((0.01, 0.0), (0.012, 0.0), (0.011, 0.001))]
    by = {x.key: x for x in r2.post_readings(post, 25_000)}
    diffs = [0.0, 0.002, 0.0]  # post-trained minus control
    mean = sum(diffs) / 3
    spread = math.sqrt(sum((x - mean) ** 2 for x in diffs) / 2 / 3)
    post_mean, ctl_mean = (0.86 + 0.862 + 0.861) / 3, (0.86 + 0.86 + 0.861) / 3
    test = math.hypot(stats.accuracy_se(post_mean, 25_000), stats.accuracy_se(ctl_mean, 25_000))  # shared reviews
    se = math.hypot(spread, test)
    assert by["post.vs_control"].quantities["se"] == pytest.approx(se) and by["post.vs_control"].verdict == "level"
    assert "post.at_chance" not in by


def test_remeasure_retrains_both_sides_with_fresh_seeds_on_cpu(tmp_path, monkeypatch):
    """Smoke settings, two tiny comparisons (Task 1 best vs runner-up, a compressed search's best vs its start),
    three fresh seeds: saved as remeasured.json and read by the readings."""
    from labkit.labs import lab2_remeasure
    from labkit.labs.lab2 import compression_configs
    from labkit.run.profiles import lab_settings

    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    s = {**lab_settings("lab2_search", "smoke"), "device": "cpu"}
    quant, prune = compression_configs(s)
    small, wide = SMALL, WIDE
    samplers = task1_samplers(s)
    task1 = samplers["numbers"]["trials"]
    comp = {"numbers": {"quant": quant, "prune": prune, "trials": {
        "compressed": [{"number": 0, "value": 0.5, "params": small}, {"number": 1, "value": 0.56, "params": wide}],
        "no compression": [{"number": 0, "value": 0.6, "params": small}]}}, "settings": s}
    jobs = lab2_remeasure.plan(samplers, comp)
    assert [j["what"] for j in jobs] == ["task1", "compressed"]  # the uncompressed search's best is its start
    assert lab2_remeasure.estimate_seconds(jobs[:1], 3) == pytest.approx(3 * 3.0 / lab2_remeasure.SHARED_SLOWDOWN)
    for name, p in (("samplers", samplers), ("compression_aware", comp)):
        (tmp_path / "lab2" / "smoke").mkdir(parents=True, exist_ok=True)
        (tmp_path / "lab2" / "smoke" / f"{name}.json").write_text(json.dumps(p))
    assert lab2_remeasure.main(["--profile", "smoke", "--seeds", "3", "--device", "cpu"]) == 0
    stored = json.loads((tmp_path / "lab2" / "smoke" / "remeasured.json").read_text())
    num = stored["numbers"]
    assert num["seeds"] == [1, 2, 3] and num["search_seed"] == 0
    assert len(num["task1"]["best"]["accuracy"]) == 3 and len(num["task2"]["compressed"]["start"]["accuracy"]) == 3
    assert all("accuracy_compressed" in run for run in num["task2"]["compressed"]["best"]["runs"])
    r = {x.key: x for x in r2.best_readings(samplers["numbers"]["best"], task1, 64, num)}
    assert r["best.winner"].quantities["fresh_seeds"] == [1, 2, 3]


def test_an_architecture_is_the_model_it_builds_whatever_the_sampler_named():
    from labkit.labs.lab2 import full_params

    grid = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 128, "intermediate_size": 512}
    assert r2.architecture(grid) == r2.architecture(full_params(grid))  # a Grid trial keeps every Linear
    cut = {**full_params(grid), "layer0.attention.self.query": "identity"}
    assert r2.architecture(cut) != r2.architecture(grid)

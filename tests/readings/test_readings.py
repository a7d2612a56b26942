"""Readings, across notebooks: every notebook has them, the committed JSON stores its numbers' readings, its
committed answers state every one, claims read readings and never rendered text, and the results page is
their render."""
import math
from pathlib import Path

import pytest

from labkit import readings, records, redraw
from labkit.readings import stats

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = list(records.records())


@pytest.fixture(autouse=True)
def committed_figures(monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(ROOT / "figures"))


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_notebook_has_readings_stored_and_stated(notebook):
    assert readings.of_notebook(notebook) is not None, f"labkit/readings/{notebook}.py is missing"
    payloads = redraw.payloads_of(notebook)
    found = readings.compute(notebook, payloads)
    assert found, f"{notebook}: no readings of its committed results"
    assert len({r.key for r in found}) == len(found), "reading keys are unique within a notebook"
    assert readings.mismatches(found, payloads) == [], "stored readings are stale: python -m labkit.redraw all --answers"
    stored = {r["key"]: r["says"] for p in payloads.values() if p for r in p.get("readings") or []}
    reworded = [r.key for r in found if stored.get(r.key) != r.says]
    assert not reworded, f"{notebook}: stored wording is stale for {reworded}: python -m labkit.redraw all --answers"
    _, text = redraw.render_answers(notebook)
    unsaid = [r.key for r in found if r.says not in text]
    assert not unsaid, f"{notebook}: the answers do not state {unsaid}"


def test_a_reading_names_the_allowed_verdicts():
    with pytest.raises(ValueError, match="allowed values: higher, lower, level"):
        readings.Reading("x", "better", "x is better", stats.RULE)
    r = readings.Reading("x", "level", "x and y are level", stats.RULE, expect=("higher",))
    assert not r.holds and readings.Reading("y", "holds", "ok", "r").holds


def test_compare_flips_its_sentence_with_its_verdict():
    says = {"higher": "A beats B ({text})", "lower": "A trails B ({text})", "level": "A and B are level ({text})"}
    up = readings.compare("k", [0.86, 0.87, 0.865], [0.80, 0.81, 0.805], 25_000, source="s", says=says)
    assert up.verdict == "higher" and up.says.startswith("A beats B")
    assert up.quantities["difference"] == pytest.approx(0.06)
    mixed = readings.compare("k", [0.86, 0.80, 0.865], [0.80, 0.81, 0.805], 25_000, source="s", says=says)
    assert mixed.verdict == "level" and mixed.quantities["sign_changes"]  # the sign changes between seeds
    down = readings.compare("k", [0.80, 0.81, 0.805], [0.86, 0.87, 0.865], 25_000, source="s", says=says)
    assert down.verdict == "lower" and "trails" in down.says


def test_the_se_of_a_difference_is_not_one_accuracys():
    # two accuracies of 0.8531 and 0.8588 on 25,000 reviews, one seed each: the SE of the difference is
    # sqrt(2) times one accuracy's, so a 2.5-SE lead over one accuracy's SE is 1.8 SE of the difference
    d = stats.difference([0.8588], [0.8531], 25_000)
    one = stats.accuracy_se(0.8531, 25_000)
    assert d.se_test == pytest.approx(math.hypot(stats.accuracy_se(0.8588, 25_000), one))
    assert d.mean / one > 2.5 > 2 > d.mean / d.se_test == pytest.approx(1.81, abs=0.01)
    assert not d.established


def test_replicates_reads_trials_by_their_spread():
    d = stats.replicates([0.01, 0.02, 0.015, 0.012])
    sd = math.sqrt(sum((x - 0.01425) ** 2 for x in [0.01, 0.02, 0.015, 0.012]) / 3)
    assert d.mean == pytest.approx(0.01425) and d.se == pytest.approx(sd / 2) and d.established
    carried = stats.replicates([0.30, 0.001, -0.002, 0.0, 0.003])  # one large trial carries the mean
    assert stats.verdict(carried) == "level"
    with pytest.raises(ValueError, match="no differences"):
        stats.replicates([])


def test_claims_compare_results_not_wording():
    stored = readings.compare("x", [0.9, 0.91, 0.92], [0.5, 0.51, 0.5], 1000, source="r",
                              says={v: f"x is {v}" for v in readings.VERDICTS})
    payloads = {"r": {"readings": [dict(stored.stored(), says="x, in other words, is higher")]}}
    assert readings.mismatches([stored], payloads) == []
    flipped = dict(stored.stored(), verdict="level")
    assert readings.mismatches([stored], {"r": {"readings": [flipped]}}) == [
        "r: x stored 'level' (x is higher...) differs from its numbers' 'higher'"]
    moved = dict(stored.stored(), quantities={**stored.quantities, "a": 0.1})
    assert readings.mismatches([stored], {"r": {"readings": [moved]}}), "a changed quantity is a changed result"


def test_claims_read_readings_not_text():
    src = (ROOT / "labkit" / "maintain" / "claims.py").read_text()
    assert "answers" not in src and ".md" not in src, "labkit.maintain.claims must assert readings, not search rendered text"


def test_the_results_page_is_the_render_of_the_committed_json():
    from labkit.readings import page

    assert (ROOT / "docs" / "results.md").read_text() == page.render(records.records(), ROOT), \
        "docs/results.md is stale: python -m labkit.redraw all --answers"

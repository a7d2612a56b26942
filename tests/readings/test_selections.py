"""A selection is remeasured before it is a finding: every reading of a point chosen from many (a searched best, a
front point) is context only, never bold and never a claim; where it was measured again on fresh seeds the
remeasure is the finding (bold, a claim of its own verdict), and where it was not it reads "not established (a
selection from N on one seed ...)". Held for every reading of every notebook's committed results."""
from __future__ import annotations

import pytest

from labkit import readings, records
from labkit.readings.core import Reading, selected
from labkit.redraw import payloads_of

COMMITTED = [(nb, profile) for profile in ("full", "quick") for nb in records.records()
             if any(payloads_of(nb, profile).values())]


@pytest.mark.parametrize("notebook,profile", COMMITTED, ids=lambda v: str(v))
def test_every_selection_is_context_and_its_remeasure_the_finding(notebook, profile):
    found = readings.compute(notebook, payloads_of(notebook, profile))
    by = {r.key: r for r in found}
    for r in found:
        if r.selection <= 1:
            continue
        assert not r.expect and "**" not in r.says, (r.key, r.says)
        if r.remeasured_by:
            again = by[r.remeasured_by]
            assert again.selection == 0 and "**" in again.says, again
            if profile == "full":  # the committed findings are claims (CLAIMS), of the verdict they state
                assert again.expect == (again.verdict,), again
        else:
            assert r.verdict == "not established" and "a selection from" in r.says, (r.key, r.says)


def test_the_searches_selections_are_marked():
    """The rule is not vacuous: Lab 3's front headline, its Task 1 best and its format searches are selections."""
    full = {r.key: r for r in readings.compute("lab3_search", payloads_of("lab3_search", "full"))}
    assert full["pareto.headline"].selection > 100 and full["pareto.headline"].remeasured_by == "pareto.headline_remeasured"
    assert full["task1.found"].remeasured_by == "task1.vs_baseline"
    assert sum(r.selection > 1 for r in full.values()) >= 5
    lab2 = {r.key: r for r in readings.compute("lab2_search", payloads_of("lab2_search", "full"))}
    assert any(r.remeasured_by == f"{k}.remeasured" for k, r in lab2.items() if k.startswith("start."))


def test_selected_marks_a_reading_and_finds_its_remeasure():
    one = Reading("x", "higher", "**A is above B** on the one seed", "rule", {}, "s", ("higher",))
    again = Reading("x.again", "level", "retrained: A and B are level", "rule", {}, "s")
    alone = selected(one, 40)
    assert alone[0].verdict == "not established" and "a selection from 40 on one seed" in alone[0].says
    assert not alone[0].expect and "**" not in alone[0].says
    plain, finding = selected(one, 40, again)
    assert plain.verdict == "higher" and plain.remeasured_by == "x.again" and not plain.expect
    assert finding.says == "**retrained**: A and B are level"
    assert selected(one, 1) == [one]  # one candidate: nothing was selected

"""Every notebook's figures, as its record lists them: each drawn from its committed JSON (full and quick) through
the one plot signature (``labkit.plots.<notebook>.plot_<figure>(payload)``), and a notebook's ``redraw.show``
saving what it drew beside the numbers it was given."""
import json

import pytest
from matplotlib.figure import Figure

from labkit import records, redraw
from labkit.results import result_dir

# every figure of every record whose JSON is committed, full and quick (quick is committed for some labs only)
COMMITTED = [(key, fig, profile) for key, r in records.records().items() for fig in r.figures
             for profile in ("full", "quick") if (result_dir(r.lab, profile) / f"{fig}.json").is_file()]


def test_every_record_has_committed_figures():
    assert {key for key, _, _ in COMMITTED} == {k for k, r in records.records().items() if r.figures}


@pytest.mark.parametrize("notebook,figure,profile", COMMITTED)
def test_every_committed_figure_draws_from_its_payload(notebook, figure, profile, committed):
    fig = redraw.plot(notebook, figure, committed(records.get(notebook).lab, figure, profile))
    assert isinstance(fig, Figure) and fig.axes


@pytest.mark.parametrize("notebook,figure", [("lab2_search", "compression_aware"), ("lab3_search", "search_formats")])
def test_show_saves_the_figure_and_the_numbers_it_was_given(notebook, figure, tmp_path, monkeypatch, committed):
    lab = records.get(notebook).lab
    payload = committed(lab, figure, "quick")
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    assert redraw.show(notebook, figure, payload["numbers"], payload["settings"]) is None
    saved = json.loads((tmp_path / lab / "quick" / f"{figure}.json").read_text())
    assert saved["numbers"] == payload["numbers"] and saved["settings"]["profile"] == "quick"
    assert (tmp_path / lab / "quick" / f"{figure}.png").stat().st_size > 0

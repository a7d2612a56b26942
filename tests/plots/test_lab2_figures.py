"""Lab 2's figures (labkit.plots.lab2_search): each drawn from its committed JSON through the one plot signature
(``plot_<figure>(payload)``), the post-training control drawn where trials recorded it, and a notebook's
``redraw.show`` saving what it drew beside the numbers it was given."""
import json
from pathlib import Path

import matplotlib
import pytest
from matplotlib.figure import Figure

from labkit import records, redraw
from labkit.plots import lab2_search

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]
LAB2 = ROOT / "figures" / "lab2"


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def committed(name, profile):
    path = (LAB2 if profile == "full" else LAB2 / profile) / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    return json.loads(path.read_text())


@pytest.mark.parametrize("profile", ["full", "quick"])
@pytest.mark.parametrize("figure", records.get("lab2_search").figures)
def test_every_committed_figure_draws_from_its_payload(figure, profile):
    fig = redraw.plot("lab2_search", figure, committed(figure, profile))
    assert isinstance(fig, Figure) and fig.axes


def test_the_samplers_figure_draws_a_curve_per_sampler_and_a_bar_per_final_best():
    payload = committed("samplers", "quick")
    fig = lab2_search.plot_samplers(payload)
    curves, zoom = fig.axes
    assert len(curves.get_lines()) == len(payload["numbers"]["bands"])
    assert [t.get_text() for t in zoom.get_xticklabels()] == list(payload["numbers"]["bands"])


def test_the_compression_figure_draws_the_control_only_where_trials_recorded_it():
    payload = committed("compression_aware", "full")
    labels = [t.get_text() for t in lab2_search.plot_compression_aware(payload).axes[0].get_legend().get_texts()]
    assert any("its control" in label for label in labels)
    for trials in payload["numbers"]["trials"].values():
        for t in trials:
            t.pop("accuracy_control", None)
    labels = [t.get_text() for t in lab2_search.plot_compression_aware(payload).axes[0].get_legend().get_texts()]
    assert not any("its control" in label for label in labels)


def test_show_saves_the_figure_and_the_numbers_it_was_given(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    payload = committed("compression_aware", "quick")
    assert redraw.show("lab2_search", "compression_aware", payload["numbers"], payload["settings"]) is None
    saved = json.loads((tmp_path / "lab2" / "quick" / "compression_aware.json").read_text())
    assert saved["numbers"] == payload["numbers"]
    assert (tmp_path / "lab2" / "quick" / "compression_aware.png").is_file()

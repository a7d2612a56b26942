"""Lab 3's figures (labkit.plots.lab3_formats, labkit.plots.lab3_search): each one drawn from its committed JSON
through the one plot signature (``plot_<figure>(payload)``), and a notebook's ``redraw.show`` saving what it drew
beside the numbers it was given."""
import json
from pathlib import Path

import matplotlib
import pytest
from matplotlib.figure import Figure

from labkit import records, redraw
from labkit.plots import lab3_formats

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]
LAB3 = ROOT / "figures" / "lab3"
FIGURES = [(nb, fig) for nb in ("lab3_formats", "lab3_search") for fig in records.get(nb).figures]


def committed(name, profile):
    path = (LAB3 if profile == "full" else LAB3 / profile) / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    return json.loads(path.read_text())


@pytest.mark.parametrize("profile", ["full", "quick"])
@pytest.mark.parametrize("notebook,figure", FIGURES)
def test_every_committed_figure_draws_from_its_payload(notebook, figure, profile):
    import matplotlib.pyplot as plt

    fig = redraw.plot(notebook, figure, committed(figure, profile))
    assert isinstance(fig, Figure) and fig.axes
    plt.close(fig)


def test_weight_snr_colours_a_fitted_variant_as_its_format_and_titles_the_swept_widths():
    import matplotlib.pyplot as plt

    rows = [{"format": f, "width": w, "bits": float(w or 8), "snr_db": 3.0 * (w or 8), "zeroed": 0.0}
            for f in ("integer", "log", "integer (frac fit per tensor)") for w in (4, 8)]
    payload = {"numbers": {"rows": rows, "integer_frac": 4},
               "settings": {"model": "tiny", "snr_widths": [4], "format_width": 8}, "provenance": {}}
    fig = lab3_formats.plot_weight_snr(payload)
    ax = fig.axes[0]
    colour = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert colour["integer (frac fit per tensor)"] == colour["integer"] != colour["log"]
    assert "widths [4, 8]" in ax.get_title()
    plt.close(fig)


def test_show_saves_the_figure_and_the_numbers_it_was_given(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    payload = committed("search_formats", "quick")
    assert redraw.show("lab3_search", "search_formats", payload["numbers"], payload["settings"]) is None
    saved = json.loads((tmp_path / "lab3" / "quick" / "search_formats.json").read_text())
    assert saved["numbers"] == payload["numbers"]
    assert (tmp_path / "lab3" / "quick" / "search_formats.png").is_file()
    plt.close("all")

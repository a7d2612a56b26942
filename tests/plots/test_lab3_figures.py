"""Lab 3's figures: the weight-SNR plot colours a fitted variant as its format and titles the widths swept."""
from labkit.plots import lab3_formats


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

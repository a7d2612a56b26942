"""Lab 2's figures (labkit.plots.lab2_search): a curve per sampler and a bar per final best, and the
post-training control drawn only where trials recorded it."""
from labkit.plots import lab2_search


def test_the_samplers_figure_draws_a_curve_per_sampler_and_a_bar_per_final_best(committed):
    payload = committed("lab2", "samplers", "quick")
    fig = lab2_search.plot_samplers(payload)
    curves, zoom = fig.axes
    assert len(curves.get_lines()) == len(payload["numbers"]["bands"])
    assert [t.get_text() for t in zoom.get_xticklabels()] == list(payload["numbers"]["bands"])


def test_the_compression_figure_draws_the_control_only_where_trials_recorded_it(committed):
    payload = committed("lab2", "compression_aware", "full")
    labels = [t.get_text() for t in lab2_search.plot_compression_aware(payload).axes[0].get_legend().get_texts()]
    assert any("its control" in label for label in labels)
    for trials in payload["numbers"]["trials"].values():
        for t in trials:
            t.pop("accuracy_control", None)
    labels = [t.get_text() for t in lab2_search.plot_compression_aware(payload).axes[0].get_legend().get_texts()]
    assert not any("its control" in label for label in labels)

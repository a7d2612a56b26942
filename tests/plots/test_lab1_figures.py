"""Lab 1's figures (labkit.plots.lab1_quantize, labkit.plots.lab1_prune) drawn from a stored result's shape:
the committed JSON, and small one- and several-seed payloads, through redraw's one plot path."""

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from labkit import redraw

SETTINGS = {"qat_epochs": 0.25, "prune_epochs": 0.25, "prune_scope": "local", "profile": "smoke", "model": "tiny"}


def payload(numbers):
    return {"numbers": numbers, "settings": SETTINGS, "provenance": {"device": "cpu", "created": "now"}}


def quantization(seeds):
    k = len(seeds)
    rows = [{"width": w, "ptq": 0.5 + w / 100, "qat": 0.6 + w / 100,
             **({"ptq_seeds": [0.5 + w / 100] * k, "qat_seeds": [0.6 + w / 100 + i / 100 for i in range(k)]}
                if k > 1 else {})} for w in (4, 8)]
    return {"fp32": 0.8, "rows": rows, "control": {"epochs": 0.25, "accuracy": 0.81}, "seeds": seeds}


def pruning(seeds, scopes=("local", "global")):
    rows = [{"method": m, "scope": sc, "sparsity": sp, "pruned": 0.7 - sp, "finetuned": 0.8 - sp / 2}
            for m, sc in (("random", "local"), ("l1-norm", "local"), ("l1-norm", "global")) if sc in scopes
            for sp in (0.1, 0.5)]
    return {"fp32": 0.8, "rows": rows, "control": None, "seeds": seeds}


def texts(fig):
    ax = fig.axes[0]
    return ax.get_title(), [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize("notebook, figure", [("lab1_quantize", "quantization"), ("lab1_prune", "pruning")])
def test_the_committed_figures_say_their_seeds(notebook, figure, committed):
    stored = committed("lab1", figure)
    fig = redraw.plot(notebook, figure, stored)
    assert isinstance(fig, Figure)
    title, legend = texts(fig)
    k = len(stored["numbers"]["seeds"])
    assert f"means of {k} training seeds" in title and legend
    plt.close(fig)


def test_quantization_draws_ptq_qat_fp32_and_the_control():
    fig = redraw.plot("lab1_quantize", "quantization", payload(quantization([0])))
    title, legend = texts(fig)
    assert legend == ["PTQ", "QAT (0.25 epoch)", "fp32 (0.800)", "fp32 + 0.25 epoch, no quantizer (0.810)"]
    assert title.endswith("(tiny, profile smoke), one training seed")
    assert [t for t in fig.axes[0].get_xticks()] == [4, 8]
    plt.close(fig)


def test_several_seeds_add_a_dot_per_seed():
    one = redraw.plot("lab1_quantize", "quantization", payload(quantization([0])))
    three = redraw.plot("lab1_quantize", "quantization", payload(quantization([0, 1, 2])))
    assert not one.axes[0].collections and len(three.axes[0].collections) == 2 * 2  # ptq and qat, per width
    plt.close(one)
    plt.close(three)


def test_pruning_draws_each_method_and_scope_before_and_after_fine_tuning():
    fig = redraw.plot("lab1_prune", "pruning", payload(pruning([0])))
    _, legend = texts(fig)
    assert legend[:2] == ["random (local), pruned", "random (local), + 0.25 epoch"]
    assert "l1-norm (global), pruned" in legend and legend[-1] == "unpruned (0.800)"  # no control measured
    plt.close(fig)
    fig = redraw.plot("lab1_prune", "pruning", payload(pruning([0], scopes=("local",))))
    assert not any("global" in t for t in texts(fig)[1])
    plt.close(fig)

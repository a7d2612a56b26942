"""Lab 0's accuracy figure (labkit.plots.lab0_graphs_lora) drawn from a stored result's shape: the committed
JSON and small one- and several-seed payloads, through redraw's one plot path."""
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from labkit import redraw

ACCURACY = Path(__file__).resolve().parents[2] / "figures" / "lab0" / "accuracy.json"
SETTINGS = {"model": "tiny", "profile": "smoke"}


def payload(accuracy, seeds=None):
    numbers = {"accuracy": accuracy, "dataset_sizes": {"train": 64, "test": 32}, **({"seeds": seeds} if seeds else {})}
    return {"numbers": numbers, "settings": SETTINGS, "provenance": {"device": "cpu", "created": "now"}}


def bars(fig):
    return [t.get_text() for t in fig.axes[0].get_xticklabels()]


def test_committed_accuracy_redraws():
    if not ACCURACY.is_file():
        pytest.skip(f"{ACCURACY} not committed")
    stored = json.loads(ACCURACY.read_text())
    fig = redraw.plot("lab0_graphs_lora", "accuracy", stored)
    assert isinstance(fig, Figure) and "untrained" in bars(fig)
    assert stored["settings"]["model"] in fig.axes[0].get_title()
    plt.close(fig)


def test_one_and_several_seeds():
    one = redraw.plot("lab0_graphs_lora", "accuracy", payload({"untrained": 0.5, "SFT": 0.8, "LoRA": 0.82}))
    assert bars(one) == ["untrained", "SFT", "LoRA"] and "one training seed" in one.axes[0].get_title()
    acc = {"untrained": 0.5, "untrained_seeds": [0.49, 0.51], "SFT": 0.8, "SFT_seeds": [0.79, 0.81]}
    two = redraw.plot("lab0_graphs_lora", "accuracy", payload(acc, seeds=[0, 1]))
    assert "means of 2 training seeds" in two.axes[0].get_title()
    assert sum(len(c.get_offsets()) for c in two.axes[0].collections) == 4  # a dot per seed on each bar
    plt.close(one)
    plt.close(two)

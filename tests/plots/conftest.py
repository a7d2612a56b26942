"""What the figure tests share: every test's pyplot figures closed after it, and the committed payloads."""
import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

FIGURES = Path(__file__).resolve().parents[2] / "figures"


@pytest.fixture(autouse=True)
def _close_figures():
    """The figures are pyplot's (a notebook's inline backend shows them): close each test's."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


@pytest.fixture
def committed():
    """``committed(lab, name, profile="full")``: the committed payload of a result (skips where none is)."""
    def load(lab: str, name: str, profile: str = "full") -> dict:
        path = (FIGURES / lab if profile == "full" else FIGURES / lab / profile) / f"{name}.json"
        if not path.is_file():
            pytest.skip(f"{path} not committed")
        return json.loads(path.read_text())
    return load

"""Helpers for tests that read or doctor the committed results."""
import json
from pathlib import Path

import pytest

from labkit import settings

FIG = Path(__file__).resolve().parent.parent / "figures"


@pytest.fixture
def committed_figures(monkeypatch):
    """Results read from the committed figures/, whatever the environment points at."""
    monkeypatch.delenv("LABKIT_FIGURES_DIR", raising=False)


def stored(lab, name):
    return json.loads((FIG / lab / f"{name}.json").read_text())


def no_machine_path(text):
    assert str(settings.REPO_ROOT) not in text and "/work/" not in text and "/tmp" not in text


def one_seed(x):
    """A stored result reduced to its means (as results were stored before seeds were kept), for doctoring."""
    if isinstance(x, dict):
        return {k: one_seed(v) for k, v in x.items() if k != "seeds" and not k.endswith("_seeds")}
    return [one_seed(v) for v in x] if isinstance(x, list) else x

"""labkit.settings: environment helpers."""
import os

import pytest

from labkit import settings


def test_environ_sets_unsets_and_then_restores():
    os.environ["LABKIT_PROBE_KEPT"] = "before"
    os.environ["LABKIT_PROBE_GONE"] = "before"
    os.environ.pop("LABKIT_PROBE_NEW", None)
    with settings.environ({"LABKIT_PROBE_KEPT": "inside", "LABKIT_PROBE_NEW": "inside", "LABKIT_PROBE_GONE": None}):
        assert os.environ["LABKIT_PROBE_KEPT"] == os.environ["LABKIT_PROBE_NEW"] == "inside"
        assert "LABKIT_PROBE_GONE" not in os.environ
    assert os.environ.pop("LABKIT_PROBE_KEPT") == "before" and "LABKIT_PROBE_NEW" not in os.environ
    assert os.environ.pop("LABKIT_PROBE_GONE") == "before"


def test_env_number_names_the_variable_and_the_allowed_values(monkeypatch):
    monkeypatch.setenv("LABKIT_PROBE_N", "12.5")
    assert settings.env_number("LABKIT_PROBE_N", "seconds > 0") == 12.5
    monkeypatch.setenv("LABKIT_PROBE_N", "")
    assert settings.env_number("LABKIT_PROBE_N", "seconds > 0") is None
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv("LABKIT_PROBE_N", bad)
        with pytest.raises(ValueError, match=f"LABKIT_PROBE_N='{bad}': allowed values are seconds > 0"):
            settings.env_number("LABKIT_PROBE_N", "seconds > 0")

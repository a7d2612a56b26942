"""Run profiles: ``smoke`` (CI, seconds), ``quick`` (CPU default, minutes), ``full`` (the labs' settings, GPU).

A notebook's ``parameters`` cell names a profile and optional overrides; ``lab_settings`` resolves them
into one flat, printed, JSON-able mapping so every figure records exactly what produced it. Each notebook's
settings are declared in its record (``labkit.records.<notebook>``).
"""
from __future__ import annotations

import copy
import os

import torch

from . import overrides as check
from .. import records
from ..records import PROFILES
from ..records._common import IMDB, IMDB_CHOICES, IMDB_RANGES


def resolve_profile(profile: str) -> str:
    """``auto`` means ``$LABKIT_PROFILE`` when set (``labkit lab --profile``), else ``full`` on a CUDA machine
    and ``quick`` elsewhere."""
    if profile == "auto":
        chosen = os.environ.get("LABKIT_PROFILE", "auto") or "auto"
        if chosen not in ("auto", *PROFILES):
            raise ValueError(f"LABKIT_PROFILE={chosen!r}: allowed values are 'auto', "
                             f"{', '.join(map(repr, PROFILES))}")
        if chosen != "auto":
            return chosen
        return "full" if torch.cuda.is_available() else "quick"
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r}: allowed values are 'auto', {', '.join(map(repr, PROFILES))}")
    return profile


def notebooks() -> list[str]:
    """The notebooks with settings (``lab_settings`` accepts these)."""
    return [key for key, r in records.records().items() if r.settings is not None]


def _settings_of(notebook: str) -> records.Settings:
    found = records.records()
    if notebook not in notebooks():
        raise KeyError(f"unknown notebook {notebook!r}; allowed: {', '.join(notebooks())}"
                       + (f" (a lab: {notebook}; its notebooks: "
                          f"{', '.join(k for k in found if k.startswith(notebook + '_'))})"
                          if any(k.startswith(notebook + "_") for k in found) else ""))
    return found[notebook].settings


def _profile_settings(s: records.Settings, profile: str) -> dict:
    settings = copy.deepcopy(IMDB[profile]) if s.imdb else {}
    settings.update(copy.deepcopy(dict(s.profiles[profile])))
    return settings


def lab_settings(notebook: str, profile: str = "auto", **overrides) -> dict:
    """The flat settings of ``notebook`` (a record's key, e.g. ``lab1_quantize``) under ``profile``, with
    ``overrides`` applied. ``settings["lab"]`` is the settings' name (shared by the notebooks of one lab that
    share one SFT model).

    Unknown notebooks and keys are errors; each override is checked against the key's values in the
    notebook's profiles (type, range, named choices: see ``labkit.run.overrides``).
    """
    s = _settings_of(notebook)
    profile = resolve_profile(profile)
    settings = _profile_settings(s, profile)
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown} for {notebook}; allowed: {sorted(settings)}")
    if overrides:
        every = [_profile_settings(s, p) for p in PROFILES]
        per_device = any(check.is_per_device(v) for e in every for v in e.values())
        ranges = {**(IMDB_RANGES if s.imdb else {}), **s.ranges}
        choices = {**(IMDB_CHOICES if s.imdb else {}), **s.choices}
        for key, value in overrides.items():
            settings[key] = check.check_override(key, value, [e[key] for e in every if key in e], per_device,
                                                 ranges.get(key), choices.get(key), s.parsers.get(key))
    settings["profile"] = profile
    settings["lab"] = s.name
    return settings

"""Run profiles: ``smoke`` (CI, seconds), ``quick`` (CPU default, minutes), ``full`` (the labs' settings, GPU).

A notebook's ``parameters`` cell names a profile and optional overrides; ``lab_settings`` resolves them
into one flat, printed, JSON-able mapping so every figure records exactly what produced it.
"""
from __future__ import annotations

import copy

import torch

PROFILES = ("smoke", "quick", "full")

# Shared by the IMDb labs. full = the course's settings (full 25k/25k, 512 tokens, 1 epoch, lr 5e-5)
# except batch 32 instead of 8, which keeps a GPU busy; stated in each notebook.
_COMMON = {
    "smoke": dict(model="minilm-l2", train_size=64, test_size=64, max_length=64, batch_size=16,
                  epochs=1.0, lr=3e-4, seed=0, device="auto"),
    # quick: 125 steps on 2 CPU cores in about 2 minutes; lr 3e-4 because 5e-5 barely moves in 125 steps
    "quick": dict(model="minilm-l2", train_size=4000, test_size=1000, max_length=128, batch_size=32,
                  epochs=1.0, lr=3e-4, seed=0, device="auto"),
    "full": dict(model="minilm-l2", train_size=None, test_size=None, max_length=512, batch_size=32,
                 epochs=1.0, lr=5e-5, seed=0, device="auto"),
}

# Per-lab additions; a lab may override a common key too.
_LABS: dict[str, dict[str, dict]] = {
    "lab0": {
        "smoke": dict(lora_rank=6, lora_alpha=1.0, lora_dropout=0.5, lora_lr=1e-3),
        "quick": dict(lora_rank=6, lora_alpha=1.0, lora_dropout=0.5, lora_lr=1e-3),
        "full": dict(lora_rank=6, lora_alpha=1.0, lora_dropout=0.5, lora_lr=1e-3),
    },
}


def resolve_profile(profile: str) -> str:
    """``auto`` means ``full`` on a CUDA machine and ``quick`` elsewhere."""
    if profile == "auto":
        return "full" if torch.cuda.is_available() else "quick"
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r}: allowed values are 'auto', {', '.join(map(repr, PROFILES))}")
    return profile


def lab_settings(lab: str, profile: str = "auto", **overrides) -> dict:
    """The flat settings of ``lab`` under ``profile``, with ``overrides`` applied (unknown keys are errors)."""
    profile = resolve_profile(profile)
    settings = copy.deepcopy(_COMMON[profile])
    settings.update(copy.deepcopy(_LABS.get(lab, {}).get(profile, {})))
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown} for {lab}; allowed: {sorted(settings)}")
    settings.update(overrides)
    settings["profile"] = profile
    settings["lab"] = lab
    return settings


def register_lab(lab: str, per_profile: dict[str, dict]) -> None:
    """Add a lab's own settings (used by lab modules that define theirs next to their code)."""
    missing = set(PROFILES) - set(per_profile)
    if missing:
        raise ValueError(f"{lab}: settings missing for profiles {sorted(missing)}")
    _LABS[lab] = per_profile

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
    # Lab 1: fixed-point widths (frac width = width // 2) and pruning sparsities; each point starts from
    # the SFT model and fine-tunes for *_epochs at finetune_lr.
    "lab1": {
        "smoke": dict(widths=[4, 8, 16], sparsities=[0.3, 0.7], qat_epochs=0.5, prune_epochs=0.5,
                      finetune_lr=1e-4, prune_scope="local"),
        "quick": dict(widths=[4, 6, 8, 12, 16, 32], sparsities=[0.1, 0.3, 0.5, 0.7, 0.9], test_size=500,
                      qat_epochs=0.25, prune_epochs=0.25, finetune_lr=1e-4, prune_scope="local"),
        "full": dict(widths=[4, 6, 8, 10, 12, 16, 20, 24, 28, 32],
                     sparsities=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], qat_epochs=1.0,
                     prune_epochs=1.0, finetune_lr=2e-5, prune_scope="local"),
    },
    # Labs that do not train on IMDb set "imdb": False and get none of the common keys.
    "lab4_perf": {p: {"imdb": False} for p in PROFILES},      # filled in by the Lab 4 perf work
    "lab4_mxint8": {p: {"imdb": False} for p in PROFILES},    # filled in by the Lab 4 MXINT8 work
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
    own = copy.deepcopy(_LABS.get(lab, {}).get(profile, {}))
    settings = copy.deepcopy(_COMMON[profile]) if own.pop("imdb", True) else {}
    settings.update(own)
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

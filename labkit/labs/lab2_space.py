"""The Lab 2 architecture space over real ``BertConfig`` fields, plus Linear-or-Identity choices.

``num_hidden_layers`` [2, 4, 8], ``num_attention_heads`` [2, 4, 8, 16], ``hidden_size``
[128, 192, 256, 384, 512], ``intermediate_size`` [512, 768, 1024, 1536, 2048]; every Linear whose
in and out features are equal (Q, K, V, attention output, pooler) may become ``nn.Identity``.
(The course's reference set fields BertConfig does not have, so only two sizes were really searched.)
"""
from __future__ import annotations

import optuna
import torch

from .. import models
from ..records.lab2_search import restrict
from ..select import set_submodule

# Linear layers of a BERT encoder layer with in == out features (names relative to the layer).
SQUARE_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense")
LINEAR_CHOICES = ["linear", "identity"]


def is_valid(arch: dict) -> bool:
    return arch["hidden_size"] % arch["num_attention_heads"] == 0


def sample_architecture(trial: optuna.Trial, identity_choices: bool = True, space: dict | None = None) -> dict:
    """Define-by-run sampling; an invalid combination is pruned, never built."""
    arch = {k: trial.suggest_categorical(k, v) for k, v in restrict(space).items()}
    if not is_valid(arch):
        raise optuna.TrialPruned(f"hidden_size {arch['hidden_size']} not divisible by "
                                 f"{arch['num_attention_heads']} heads")
    layers = {}
    if identity_choices:
        for i in range(arch["num_hidden_layers"]):
            for name in SQUARE_LINEARS:
                key = f"layer{i}.{name}"
                layers[key] = trial.suggest_categorical(key, LINEAR_CHOICES)
    return {"config": arch, "linears": layers}


def build_model(arch: dict, seed: int = 0, **config_overrides) -> torch.nn.Module:
    """A classifier initialised from ``seed`` with ``arch['config']`` and the chosen Identity layers."""
    model = models.from_config(seed=seed, **arch["config"], **config_overrides)
    for key, choice in arch.get("linears", {}).items():
        if choice == "identity":
            layer, name = key.split(".", 1)
            set_submodule(model, f"bert.encoder.layer.{int(layer[5:])}.{name}", torch.nn.Identity())
        elif choice != "linear":
            raise ValueError(f"{key}={choice!r}: allowed values are {LINEAR_CHOICES}")
    return model

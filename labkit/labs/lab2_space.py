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
from ..select import set_submodule

SPACE = {
    "num_hidden_layers": [2, 4, 8],
    "num_attention_heads": [2, 4, 8, 16],
    "hidden_size": [128, 192, 256, 384, 512],
    "intermediate_size": [512, 768, 1024, 1536, 2048],
}
# Linear layers of a BERT encoder layer with in == out features (names relative to the layer).
SQUARE_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense")
LINEAR_CHOICES = ["linear", "identity"]


def is_valid(arch: dict) -> bool:
    return arch["hidden_size"] % arch["num_attention_heads"] == 0


def restrict(space: dict | None) -> dict:
    """The lab's space, or a narrower one (each given field a non-empty subset of the lab's values)."""
    if space is None:
        return dict(SPACE)
    if not isinstance(space, dict):
        raise TypeError(f"search space must be a dict of field -> list of choices (fields {list(SPACE)}) or "
                        f"None, got {space!r}")
    unknown = sorted(set(space) - set(SPACE))
    if unknown:
        raise KeyError(f"search space field(s) {unknown} unknown; allowed: {list(SPACE)}")
    for key, values in space.items():
        # a scalar (or a string, which iterates) would fail later, deep in Optuna or a worker
        if not isinstance(values, (list, tuple)):
            hint = f"; for one value give [{values!r}]" if values in SPACE[key] else ""
            raise TypeError(f"space[{key!r}] must be a non-empty list of choices from {SPACE[key]}, got "
                            f"{values!r}{hint}")
        bad = [v for v in values if v not in SPACE[key]]
        if not values or bad:
            raise ValueError(f"space[{key!r}] must be a non-empty subset of {SPACE[key]}, got {values}")
    return {**SPACE, **space}


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


def grid_space(space: dict | None = None) -> dict:
    """The finite grid for GridSampler: the four sizes (3 x 4 x 5 x 5 = 300 points), all Linear kept.

    Per-layer Identity choices depend on the depth, which a fixed grid cannot express; sampled over a
    grid they would also multiply the grid by 2^(4 * layers).
    """
    return {k: list(v) for k, v in restrict(space).items()}


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

"""The one layer-selection vocabulary shared by quantize, prune and search.

A spec is ``{"by": "type" | "name" | "regex", "default": CFG, "<type, name or pattern>": CFG, ...}`` (the
course's shape). Each candidate layer gets the CFG of the first matching key, else ``default``; a CFG of
None, or one whose ``name`` is None or "none", leaves the layer alone. MASE's ``{"config": {...}}``
wrapping is accepted and unwrapped. The caller's dict is never mutated.
"""
from __future__ import annotations

import copy
import re
from typing import Callable, Iterator

import torch

BY = ("type", "name", "regex")
TYPE_NAMES = {"linear": torch.nn.Linear, "conv2d": torch.nn.Conv2d}


def _unwrap(cfg):
    if isinstance(cfg, dict) and set(cfg) == {"config"}:
        cfg = cfg["config"]
    return copy.deepcopy(cfg)


def is_skip(cfg) -> bool:
    return cfg is None or (isinstance(cfg, dict) and cfg.get("name", "") in (None, "none"))


def validate_spec(spec: dict) -> None:
    if not isinstance(spec, dict):
        raise TypeError(f"a selection spec is a dict, got {type(spec).__name__}")
    by = spec.get("by", "type")
    if by not in BY:
        raise ValueError(f"'by'={by!r}: allowed values are {', '.join(map(repr, BY))}")
    if by == "type":
        unknown = [k for k in spec if k not in ("by", "default") and k not in TYPE_NAMES]
        if unknown:
            raise KeyError(f"unknown layer type key(s) {unknown} for by='type'; allowed: {sorted(TYPE_NAMES)}")
    if by == "regex":
        for key in spec:
            if key not in ("by", "default"):
                try:
                    re.compile(key)
                except re.error as err:
                    raise ValueError(f"regex key {key!r} does not compile: {err}") from err


def select(model: torch.nn.Module, spec: dict, kinds=(torch.nn.Linear,),
           filter_fn: Callable[[str, torch.nn.Module], bool] | None = None) -> Iterator[tuple[str, torch.nn.Module, object]]:
    """Yield ``(name, module, cfg)`` for each module of ``kinds`` that the spec gives a non-skip cfg.

    A name key that matches no layer is an error (a typo must not silently select nothing).
    """
    validate_spec(spec)
    by = spec.get("by", "type")
    keys = [k for k in spec if k not in ("by", "default")]
    matched = set()
    for name, module in model.named_modules():
        if not isinstance(module, kinds) or (filter_fn is not None and not filter_fn(name, module)):
            continue
        cfg = spec.get("default")
        for key in keys:
            hit = (isinstance(module, TYPE_NAMES[key]) if by == "type" else
                   name == key if by == "name" else re.fullmatch(key, name) is not None)
            if hit:
                cfg = spec[key]
                matched.add(key)
                break
        cfg = _unwrap(cfg)
        if not is_skip(cfg):
            yield name, module, cfg
    if by == "name":
        missing = [k for k in keys if k not in matched]
        if missing:
            raise KeyError(f"layer name(s) {missing} not found among the model's "
                           f"{', '.join(k.__name__ for k in kinds)} layers")


def set_submodule(model: torch.nn.Module, name: str, new: torch.nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)

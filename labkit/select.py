"""The one layer-selection vocabulary shared by quantize, prune and search.

A spec is ``{"by": "type" | "name" | "regex", "default": CFG, "<type, name or pattern>": CFG, ...}`` (the
course's shape). Each candidate layer gets the CFG of the first matching key, else ``default``; a CFG of
None, or one whose ``name`` is None or "none", leaves the layer alone. MASE's ``{"config": {...}}``
wrapping is accepted and unwrapped. The caller's dict is never mutated.

A spec with neither ``default`` nor a key selects nothing and is an error; so is a key (type, name or
regex alike) that matches no candidate layer: a typo must not silently select nothing. Skipping every
layer on purpose is spelled out: ``{"default": None}``.
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
    if not any(k != "by" for k in spec):
        raise ValueError(f"selection spec {spec} selects nothing: give 'default' and/or {by} keys, e.g. "
                         "{'by': 'type', 'linear': CFG}; to leave every layer alone on purpose, "
                         "{'default': None}")
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

    A key that matches no candidate layer is an error, raised once every layer has been seen (callers
    collect the whole selection before changing the model).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"filter_fn must be a callable (name, module) -> bool or None, got {filter_fn!r}")
    validate_spec(spec)
    by = spec.get("by", "type")
    keys = [k for k in spec if k not in ("by", "default")]
    matched, candidates = set(), []

    def hit(key, name, module):
        return (isinstance(module, TYPE_NAMES[key]) if by == "type" else
                name == key if by == "name" else re.fullmatch(key, name) is not None)

    for name, module in model.named_modules():
        if not isinstance(module, kinds) or (filter_fn is not None and not filter_fn(name, module)):
            continue
        candidates.append(name)
        hits = [k for k in keys if hit(k, name, module)]
        matched.update(hits)  # every matching key counts, not only the first (which wins the layer)
        cfg = _unwrap(spec[hits[0]] if hits else spec.get("default"))
        if not is_skip(cfg):
            yield name, module, cfg
    missing = [k for k in keys if k not in matched]
    if missing:
        what = {"type": "layer type", "name": "layer name", "regex": "regex"}[by]
        among = (f"{len(candidates)} candidate {'/'.join(k.__name__ for k in kinds)} layers"
                 + (" (after filter_fn)" if filter_fn is not None else ""))
        examples = ", ".join(candidates[:4]) + (", ..." if len(candidates) > 4 else "")
        raise KeyError(f"{what} key(s) {missing} not found: they match none of the model's {among}"
                       + (f" (e.g. {examples})" if candidates else ""))


def set_submodule(model: torch.nn.Module, name: str, new: torch.nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)

"""Compression pipeline shared by Lab 1 and the compression-aware search of Lab 2.

``compress(model, quant=..., prune=...)`` quantizes first and prunes second: pruning registers its
mask on the ``QuantLinear`` weight, so the mask survives later training (pruning first and then copying
weights into new quantized layers would drop the parametrization and let pruned weights regrow).
"""
from __future__ import annotations

import copy
from typing import Callable, NamedTuple

import torch

from . import prune as _prune
from . import quant as _quant
from .quant.formats._util import check_range
from .quant.formats.integer import MAX_FRAC_WIDTH, MAX_WIDTH


class CompressResult(NamedTuple):
    model: torch.nn.Module
    quantized: dict
    pruned: dict
    report: dict


def fixed_point(width: int, frac_width: int | None = None) -> dict:
    """The course's flat fixed-point config for data_in, weight and bias (frac width = width // 2 if None)."""
    # the integer format's own bounds, checked here so the error comes from the call that got the value
    check_range("fixed_point", "width", width, 1, MAX_WIDTH)
    if frac_width is not None:
        check_range("fixed_point", "frac_width", frac_width, -MAX_FRAC_WIDTH, MAX_FRAC_WIDTH)
    frac = width // 2 if frac_width is None else frac_width
    return {"name": "integer", **{f"{role}_{k}": v for role in ("data_in", "weight", "bias")
                                  for k, v in (("width", width), ("frac_width", frac))}}


def compress(model: torch.nn.Module, quant=None, prune=None,
             filter_fn: Callable[[str, torch.nn.Module], bool] | None = None) -> CompressResult:
    if quant is None and prune is None:
        raise ValueError("compress needs a quant config, a prune config, or both")
    out = copy.deepcopy(model)
    quantized = pruned = {}
    report = {}
    if quant is not None:
        out, quantized = _quant.quantize(out, quant, filter_fn=filter_fn, inplace=True)
        report["average_bits"] = {k: v for k, v in _quant.average_bits(out).items() if k != "per_layer"}
    if prune is not None:
        res = _prune.prune(out, prune, filter_fn=filter_fn, inplace=True)
        pruned = res.changed
        report["prune"] = res.report
    return CompressResult(out, quantized, pruned, report)

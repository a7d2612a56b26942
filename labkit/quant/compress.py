"""Compression pipeline shared by Lab 1 and the compression-aware search of Lab 2.

``compress(model, quant=..., prune=...)`` quantizes first and prunes second: pruning registers its
mask on the ``QuantLinear`` weight, so the mask survives later training (pruning first and then copying
weights into new quantized layers would drop the parametrization and let pruned weights regrow).
"""
from __future__ import annotations

import copy
from typing import Callable, NamedTuple

import torch

from .. import prune as _prune
from .bits import average_bits
from .transform import quantize


class CompressResult(NamedTuple):
    model: torch.nn.Module
    quantized: dict
    pruned: dict
    report: dict


def compress(model: torch.nn.Module, quant=None, prune=None,
             filter_fn: Callable[[str, torch.nn.Module], bool] | None = None, qat_matmul: str = "fp32",
             compile: bool = True) -> CompressResult:
    """A compressed copy of ``model``; ``qat_matmul`` and ``compile``: the quantized layers' path under bf16 autocast
    (``labkit.quant.quantize``)."""
    if quant is None and prune is None:
        raise ValueError("compress needs a quant config, a prune config, or both")
    out = copy.deepcopy(model)
    quantized = pruned = {}
    report = {}
    if quant is not None:
        out, quantized = quantize(out, quant, filter_fn=filter_fn, inplace=True, qat_matmul=qat_matmul,
                                  compile=compile)
        report["average_bits"] = {k: v for k, v in average_bits(out).items() if k != "per_layer"}
    if prune is not None:
        res = _prune.prune(out, prune, filter_fn=filter_fn, inplace=True)
        pruned = res.changed
        report["prune"] = res.report
    return CompressResult(out, quantized, pruned, report)

"""Average stored bits, counting what is stored: each tensor's bits per element times its element count.

Weights: every Linear's weight (unquantized ones at their dtype's width). Data: a Linear's input has
``in_features`` elements per token, so input bits are weighted by ``in_features``. Bias is reported with
the weights. The course's reference added frac width to width; here a fixed-point int8/4 counts 8.
"""
from __future__ import annotations

import torch

from .linear import QuantLinear


def _float_bits(t: torch.Tensor) -> float:
    return float(torch.finfo(t.dtype).bits)


def mean_bits(tensors) -> float:
    """Stored bits per element over ``(bits_per_element, element_count)`` pairs: ``sum(bits * count) /
    sum(count)``, so a large tensor weighs more than a small one. A ``ValueError`` when there is no element to
    count (no pair, or every count zero). Lab 1's exercise ``lab1.average_bits`` checks a student's against it."""
    total_bits = total = 0.0
    for bits, count in tensors:
        total_bits += bits * count
        total += count
    if not total:
        raise ValueError("no elements to count: an average of stored bits needs at least one element")
    return total_bits / total


def average_bits(model: torch.nn.Module) -> dict:
    weights, data = [], []   # (bits per element, elements) of every weight and bias; of every input
    per_layer = {}
    for name, m in model.named_modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        q = m if isinstance(m, QuantLinear) else None
        shape = tuple(m.weight.shape)
        wb = q.config.weight.bits_per_element(shape) if q and q.config.weight else _float_bits(m.weight)
        weights.append((wb, m.weight.numel()))
        if m.bias is not None:
            bb = (q.config.bias.bits_per_element(tuple(m.bias.shape)) if q and q.config.bias
                  else _float_bits(m.bias))
            weights.append((bb, m.bias.numel()))
        db = (q.config.data_in.bits_per_element((1, m.in_features)) if q and q.config.data_in
              else _float_bits(m.weight))
        data.append((db, m.in_features))
        per_layer[name] = {"weight_bits": wb, "data_in_bits": db}
    w_count = sum(count for _, count in weights)
    if not w_count:
        raise ValueError("the model has no Linear layers to count")
    return {"weight_bits": mean_bits(weights), "data_in_bits": mean_bits(data),
            "linear_parameters": int(w_count), "per_layer": per_layer}

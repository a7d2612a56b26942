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


def average_bits(model: torch.nn.Module) -> dict:
    w_bits = w_count = d_bits = d_count = 0.0
    per_layer = {}
    for name, m in model.named_modules():
        if not isinstance(m, torch.nn.Linear):
            continue
        q = m if isinstance(m, QuantLinear) else None
        shape = tuple(m.weight.shape)
        wb = q.config.weight.bits_per_element(shape) if q and q.config.weight else _float_bits(m.weight)
        tensors = [(wb, m.weight.numel())]
        if m.bias is not None:
            bb = (q.config.bias.bits_per_element(tuple(m.bias.shape)) if q and q.config.bias
                  else _float_bits(m.bias))
            tensors.append((bb, m.bias.numel()))
        db = (q.config.data_in.bits_per_element((1, m.in_features)) if q and q.config.data_in
              else _float_bits(m.weight))
        for bits, count in tensors:
            w_bits += bits * count
            w_count += count
        d_bits += db * m.in_features
        d_count += m.in_features
        per_layer[name] = {"weight_bits": wb, "data_in_bits": db}
    if not w_count:
        raise ValueError("the model has no Linear layers to count")
    return {"weight_bits": w_bits / w_count, "data_in_bits": d_bits / d_count,
            "linear_parameters": int(w_count), "per_layer": per_layer}
